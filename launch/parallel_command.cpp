// tpsrun --parallel K: K independent sequences generated at once, for
// throughput. Split inside layers, the ranks take the sequences in turn, one
// token at a time, together. Split by layers, the ranks form a pipeline with
// several sequences in flight: while rank 1 runs sequence A's token through
// its layers, rank 0 runs sequence B's through its own, so every rank is busy
// although each token passes through the ranks one after another.
//
// The pipeline's messages: rank 0 sends each piece of work down the line as
// a header {sequence, tokens} followed by the hidden state (which the
// session itself sends and receives, one per batch); every rank passes the
// header on before it runs the piece, so the ranks after it know what comes.
// The last rank samples and sends {sequence, token} back to rank 0, which
// decides when a sequence is done and, at the end, sends the header
// {-1, 0} that ends every rank's loop.
#include "launch/parallel_command.h"

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "launch/json_output.h"
#include "launch/rank_run.h"
#include "launch/sequence.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace tps {
namespace {

std::vector<std::string> read_prompts(const RunOptions& o) {
  if (o.prompts_file.empty()) {
    if (o.prompt.empty()) throw InputError("-p: the prompt is empty");
    return {o.prompt};
  }
  std::ifstream in(o.prompts_file);
  if (!in) throw InputError(cat(o.prompts_file, ": cannot read the prompts"));
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) prompts.push_back(line);
  if (prompts.empty()) throw InputError(cat(o.prompts_file, ": no prompts (one per line)"));
  return prompts;
}

// A sequence as every rank keeps it: rank 0 follows its tokens, every rank
// has its session (the KV cache of its layers), the last rank its sampler.
struct Stream {
  Stream(const RunOptions& o, std::vector<int32_t> prompt, RankRun& r, const SamplerParams& sp)
      : seq(o, std::move(prompt)), session(r.model, r.session_options(o, o.ctx), r.pool, r.exchange), sampler(sp) {}
  Sequence seq;
  std::string text;  // what it shows so far
  Session session;
  Sampler sampler;
  int32_t next = -1;     // the token to run next; -1 before the prompt ran
  bool waiting = false;  // rank 0: its token is on its way back
};

struct Header {
  int32_t stream, tokens;
};

class ParallelRun {
 public:
  ParallelRun(const RunOptions& o, RankRun& r) : o_(o), r_(r) {}

  void add(std::vector<int32_t> prompt, const SamplerParams& sp) {
    if (static_cast<int>(prompt.size()) > o_.ctx)
      throw InputError(
          cat("a prompt is ", prompt.size(), " tokens, longer than the context of ", o_.ctx, " (use --ctx)"));
    streams_.push_back(std::make_unique<Stream>(o_, std::move(prompt), r_, sp));
  }
  const std::vector<std::unique_ptr<Stream>>& streams() const { return streams_; }

  // Ranks in lockstep: every stream in turn, one token each.
  void lockstep() {
    for (auto& s : streams_) step(*s, s->seq.prompt());
    for (bool active = true; active;) {
      active = false;
      for (auto& s : streams_)
        if (!s->seq.done()) {
          step(*s, {s->next});
          active = true;
        }
    }
  }

  void pipeline() {
    const int me = r_.shard().rank, last = r_.last_rank();
    if (me == 0) {
      drive();
      return;
    }
    for (;;) {
      Header h;
      r_.exchange.recv(&h, sizeof h, me - 1);
      if (me != last) r_.exchange.send(&h, sizeof h, me + 1);
      if (h.stream < 0) return;
      Stream& s = *streams_.at(h.stream);
      s.session.forward(std::vector<int32_t>(h.tokens, 0), false, logits_);
      if (me == last) {
        const int32_t token[2] = {h.stream, s.sampler.sample(logits_)};
        r_.exchange.send(token, sizeof token, 0);
      }
    }
  }

 private:
  // Runs tokens through the whole model on ranks in lockstep and takes the
  // token the ranks pick.
  void step(Stream& s, const std::vector<int32_t>& tokens) {
    s.session.forward(tokens, false, logits_);
    accept(s, pick(r_, logits_, s.sampler, 0).id);
  }

  void accept(Stream& s, int32_t id) {
    s.text += s.seq.accept(id, r_.model.tokenizer);
    s.next = id;
    if (!s.seq.done() && s.session.position() >= s.session.context()) s.seq.finish("context full");
  }

  // Rank 0 of a pipeline: starts every stream's next piece as soon as it is
  // known, and waits for a token only when nothing else can start.
  void drive() {
    const int last = r_.last_rank();
    int in_flight = 0;
    for (;;) {
      for (size_t i = 0; i < streams_.size(); ++i) {
        Stream& s = *streams_[i];
        if (s.seq.done() || s.waiting) continue;
        const std::vector<int32_t> tokens = s.next < 0 ? s.seq.prompt() : std::vector<int32_t>{s.next};
        const Header h{static_cast<int32_t>(i), static_cast<int32_t>(tokens.size())};
        r_.exchange.send(&h, sizeof h, 1);
        s.session.forward(tokens, false, logits_);
        s.waiting = true;
        ++in_flight;
      }
      if (in_flight == 0) break;
      int32_t token[2];
      r_.exchange.recv(token, sizeof token, last);
      --in_flight;
      Stream& s = *streams_.at(token[0]);
      s.waiting = false;
      accept(s, token[1]);
    }
    const Header end{-1, 0};
    r_.exchange.send(&end, sizeof end, 1);
  }

  const RunOptions& o_;
  RankRun& r_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<float> logits_;
};

}  // namespace

int run_parallel(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup) {
  SamplerParams sp = o.sampler;
  validate(sp);
  if (o.parallel < 1) throw InputError(cat("--parallel ", o.parallel, ": expected >= 1"));
  if (o.max_tokens < 1) throw InputError(cat("-n ", o.max_tokens, ": expected >= 1 with --parallel"));
  const std::vector<std::string> prompts = read_prompts(o);

  RankRun r(o, mpi, setup, Clock::now());
  if (!o.seed_given) sp.seed = std::random_device{}();
  r.exchange.broadcast(&sp.seed, sizeof sp.seed, 0);
  ParallelRun run(o, r);
  int prompt_tokens = 0;
  for (int i = 0; i < o.parallel; ++i) {
    SamplerParams own = sp;
    own.seed = sp.seed + static_cast<uint64_t>(i);  // stream i: seed + i
    std::vector<int32_t> ids = encode_prompt(o, r.model.tokenizer, prompts[i % prompts.size()]);
    prompt_tokens += static_cast<int>(ids.size());
    run.add(std::move(ids), own);
  }

  r.exchange.barrier();
  const auto t0 = Clock::now();
  if (r.pipeline() && mpi.size() > 1)
    run.pipeline();
  else
    run.lockstep();
  const double seconds = seconds_since(t0);
  if (mpi.rank() != 0) return 0;

  int generated = 0;
  nlohmann::json streams = nlohmann::json::array();
  std::string text;
  for (size_t i = 0; i < run.streams().size(); ++i) {
    Stream& s = *run.streams()[i];
    const Sequence& q = s.seq;
    generated += static_cast<int>(q.generated().size());
    const std::string t = s.text + s.seq.flush();
    streams.push_back(
        {{"prompt_tokens", q.prompt().size()}, {"generated_ids", q.generated()}, {"text", t}, {"stop", q.stop()}});
    text += cat("--- sequence ", i, " (", q.generated().size(), " tokens, ", q.stop(), ") ---\n", t, "\n");
  }
  const double throughput = generated / std::max(seconds, 1e-9);
  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"parallel", o.parallel},
                        {"split", split_mode_name(r.shard().mode)},
                        {"ranks", mpi.size()},
                        {"threads", setup.binding.threads},
                        {"exchange", transport_name(r.exchange.transport())},
                        {"prompt_tokens", prompt_tokens},
                        {"generated_tokens", generated},
                        {"seconds", seconds},
                        {"throughput_tokens_per_s", throughput},
                        {"seed", sp.seed},
                        {"sequences", streams}};
    print_json(j);
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
    log_info(o.parallel, " sequences: ", prompt_tokens, " prompt tokens, ", generated, " generated in ",
             cat(static_cast<int>(seconds * 100) / 100.0), " s: ", cat(static_cast<int>(throughput * 100) / 100.0),
             " tok/s in all; ", mpi.size(), " rank(s), ", split_mode_name(r.shard().mode), " split, ",
             setup.binding.threads, " thread(s) per rank");
  }
  return 0;
}

}  // namespace tps
