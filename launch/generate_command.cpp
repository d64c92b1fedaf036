#include "launch/generate_command.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "engine/text/generated_text.h"
#include "launch/json_output.h"
#include "launch/output_format.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mapped_file.h"
#include "runtime/process.h"
#include "runtime/stop_signal.h"

namespace tps {
namespace {

// The prompts: -p, or the lines of --prompts-file (empty lines skipped).
std::vector<std::string> read_prompts(const RunOptions& o) {
  if (o.prompts_file.empty()) return {o.prompt};  // never empty: the command line refuses that
  std::istringstream in(read_text_file(o.prompts_file));
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) prompts.push_back(line);
  if (prompts.empty()) throw InputError(cat(o.prompts_file, ": no prompts (one per line)"));
  return prompts;
}

// The prompt's tokens: the text as is (control tokens parsed), or rendered
// as a harmony chat with --chat.
std::vector<int32_t> encode_prompt(const RunOptions& o, const Tokenizer& tokenizer, const std::string& text) {
  if (!o.chat) return tokenizer.encode(text, true);
  return render_chat_prompt(text, ChatOptions{"", o.reasoning, ""},
                            [&](const std::string& s) { return tokenizer.encode(s); });
}

// One sequence as rank 0 follows it.
struct Followed {
  Followed(int i, std::vector<int32_t> p, const TextOptions& t) : index(i), prompt(std::move(p)), text(t) {}
  int index;  // in the order given
  std::vector<int32_t> prompt;
  GeneratedText text;
  std::string shown;                        // the text so far
  int reused = 0;                           // prompt tokens from the prefix cache
  double first_token = -1, last_token = 0;  // seconds since the start
  nlohmann::json logprobs = nlohmann::json::array();
};

nlohmann::json logprob_json(const Pick& p) {
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < p.n_top; ++i) top.push_back({p.top[i].id, p.top[i].logprob});
  return {{"id", p.id}, {"logprob", p.logprob}, {"top", top}};
}

nlohmann::json parts_json(const StepTimings& t) {
  return {{"qkv_projection", t.qkv}, {"attention", t.attention}, {"output_projection", t.output_proj},
          {"router", t.router},      {"experts", t.experts},     {"logits", t.logits},
          {"exchange", t.exchange}};
}

double round_to(double v, double unit) { return static_cast<int64_t>(v / unit) * unit; }

// Per rank, gathered on every rank: what the summary line and --json report.
struct RankStats {
  int numa_node;
  double weight_bytes, on_node, decode_bytes_per_token, exchange_seconds, peak_rss_mib, kv_bytes, bytes_read;
  StepTimings decode;  // seconds by part of the forward pass in decode steps (Generator::Stats)
};

}  // namespace

int run_generate(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup) {
  SamplerParams sp = o.sampler;
  validate(sp);
  if (o.max_tokens < 1) throw InputError(cat("-n ", o.max_tokens, ": expected at least 1 token"));
  const std::vector<std::string> prompts = read_prompts(o);
  const int n_seq = o.prompts_file.empty() ? o.parallel : static_cast<int>(prompts.size());
  const bool root = mpi.rank() == 0, one = n_seq == 1;

  RankRun r(o, mpi, setup, Clock::now());
  const Model& m = r.model;
  // One seed for every rank: rank 0's, random unless given. Sequence i
  // samples with seed + i.
  if (!o.seed_given) sp.seed = std::random_device{}();
  r.exchange.broadcast(&sp.seed, sizeof sp.seed, 0);
  const std::string constraint = output_format_spec(o, m.tokenizer);  // every rank: each refuses alike
  Generator gen(m, r.pool, r.exchange, generator_options(o));
  r.log_kv_pool(gen);

  std::map<int, Followed> seqs;  // rank 0, by the generator's id
  int prompt_tokens = 0;
  if (root)
    for (int i = 0; i < n_seq; ++i) {
      Followed f(i, encode_prompt(o, m.tokenizer, prompts[i % prompts.size()]),
                 TextOptions{o.max_tokens, o.chat, o.show_analysis});
      prompt_tokens += static_cast<int>(f.prompt.size());
      SequenceParams params;
      params.sampler = sp;
      params.sampler.seed = sp.seed + static_cast<uint64_t>(i);
      params.max_new = o.max_tokens;
      params.top_logprobs = o.top_logprobs;
      params.constraint = constraint;
      const int id = gen.add(f.prompt, params);
      seqs.emplace(id, std::move(f));
    }

  // One sequence streams its text and splits its time into the prompt's
  // (until the first token) and the decode's; the parts of the forward pass
  // and the exchange's time are those of the decode steps.
  const Clock::time_point t0 = Clock::now();
  // Several sequences: the decode phase is what follows the moment every
  // one has its first token (the tokens chosen after it, over its time).
  int started = 0, decode_tokens = 0;
  double all_started = -1;
  Generator::Events events;
  events.token = [&](int id, const Pick& p) {
    Followed& f = seqs.at(id);
    const double now = seconds_since(t0);
    if (f.first_token < 0) {
      f.first_token = now;
      f.reused = gen.scheduler().sequence(id).reused;
      if (++started == n_seq) all_started = now;
    } else if (all_started >= 0) {
      ++decode_tokens;
    }
    f.last_token = now;
    if (o.top_logprobs > 0) f.logprobs.push_back(logprob_json(p));
    const std::string shown = f.text.accept(p.id, m.tokenizer);
    f.shown += shown;
    if (one && !o.json) {
      std::fwrite(shown.data(), 1, shown.size(), stdout);
      flush_stdout();  // lost output ends the run now, not after the last token
    }
    return !f.text.done();
  };
  events.context_full = [&](int id) { seqs.at(id).text.finish("context full"); };
  events.waiting = [&](int id, const std::string& why) { log_info("sequence ", seqs.at(id).index, " waits: ", why); };
  // SIGTERM or Ctrl-C (to mpirun, which passes them on) stop the run at its
  // next step: what was generated is printed, then the job ends with 128 +
  // the signal. (While the model loads they end it at once.)
  catch_stop_signals();
  events.between_steps = [](bool idle) { return !idle && stop_signal() == 0; };
  gen.run(events);
  const double seconds = seconds_since(t0);
  int stopped_by = root ? stop_signal() : 0;  // rank 0's word: the others may see the signal later or not at all
  r.exchange.broadcast(&stopped_by, sizeof stopped_by, 0);
  const std::string signal_name = stopped_by ? cat("SIG", sigabbrev_np(stopped_by)) : "";
  auto finish = [&] {
    if (stopped_by != 0) throw Error("stopped by " + signal_name, 128 + stopped_by);
    return 0;
  };
  if (root && stopped_by != 0)
    for (auto& [id, f] : seqs)
      if (!f.text.done()) f.text.finish(signal_name);

  // Every rank's share, its decode steps' time apart.
  const Generator::Stats& gs = gen.stats();
  const RankStats mine{r.numa_node,
                       static_cast<double>(m.weights.memory.size()),
                       r.on_node,
                       static_cast<double>(decode_bytes_per_token(m.weights.views, m.config, m.shard)),
                       gs.decode_exchange_seconds,
                       peak_rss_mib(),
                       static_cast<double>(gen.kv().bytes()),
                       static_cast<double>(gen.weight_bytes_read()),
                       gs.decode};
  std::vector<RankStats> all(mpi.size());
  r.exchange.all_gather(&mine, all.data(), sizeof mine);
  if (!root) return finish();

  int generated = 0;
  for (auto& [id, f] : seqs) generated += static_cast<int>(f.text.generated().size());
  nlohmann::json step_tokens = nlohmann::json::object();
  for (auto [tokens, count] : gs.step_tokens) step_tokens[std::to_string(tokens)] = count;
  nlohmann::json ranks = nlohmann::json::array();
  double bytes_per_token = 0, exchange_max = 0, bytes_read = 0;
  for (int q = 0; q < mpi.size(); ++q) {
    const RankStats& x = all[q];
    bytes_per_token += x.decode_bytes_per_token;
    bytes_read += x.bytes_read;
    exchange_max = std::max(exchange_max, x.exchange_seconds);
    ranks.push_back({{"rank", q},
                     {"numa_node", x.numa_node},
                     {"weight_bytes", x.weight_bytes},
                     {"weight_pages_on_node", x.on_node},
                     {"kv_bytes", x.kv_bytes},
                     {"weight_bytes_read", x.bytes_read},
                     {"decode_weight_bytes_per_token", x.decode_bytes_per_token},
                     {"decode_exchange_seconds", x.exchange_seconds},
                     {"peak_rss_mib", x.peak_rss_mib},
                     {"decode_seconds_by_part", parts_json(x.decode)}});
  }
  nlohmann::json j = {{"model", o.model},
                      {"split", split_mode_name(m.shard.mode)},
                      {"ranks", mpi.size()},
                      {"exchange", transport_name(r.exchange.transport())},
                      {"threads", setup.binding.threads},
                      {"kernels", isa_name(best_kernel_set().isa)},
                      {"kv_type", kv_type_name(gen.kv().type())},
                      {"seed", sp.seed},
                      {"load_seconds", r.load_seconds},
                      {"prompt_tokens", prompt_tokens},
                      {"generated_tokens", generated},
                      {"seconds", seconds},
                      {"steps", gs.steps},
                      {"decode_steps", gs.decode_steps},
                      {"decode_step_tokens", gs.decode_tokens},
                      {"step_tokens", step_tokens},
                      {"weight_bytes_read_per_step", bytes_read / std::max<int64_t>(gs.steps, 1)},
                      {"decode_weight_bytes_per_token", bytes_per_token},
                      {"peak_rss_mib", peak_rss_mib()},
                      {"per_rank", ranks}};
  // Every sequence's record; one sequence adds the classic fields of a
  // single stream (what bench/e2e and tpsbench read).
  const double throughput = generated / std::max(seconds, 1e-9);
  const double decode_tps = decode_tokens / std::max(seconds - all_started, 1e-9);
  nlohmann::json sequences = nlohmann::json::array();
  std::string tail, text;
  for (auto& [id, f] : seqs) {
    tail = f.text.flush();
    f.shown += tail;
    sequences.push_back({{"prompt_tokens", f.prompt.size()},
                         {"reused_prompt_tokens", f.reused},
                         {"generated_ids", f.text.generated()},
                         {"text", f.shown},
                         {"stop", f.text.stop()},
                         {"time_to_first_token_s", f.first_token},
                         {"seconds", f.last_token}});
    if (o.top_logprobs > 0) sequences.back()["logprobs"] = f.logprobs;
    text += cat("--- sequence ", f.index, " (", f.text.generated().size(), " tokens, ", f.text.stop(), ") ---\n",
                f.shown, "\n");
  }
  j.update({{"parallel", o.parallel},
            {"throughput_tokens_per_s", throughput},
            {"all_first_tokens_s", all_started},
            {"decode_tokens_per_s", decode_tps},
            {"sequences", sequences}});
  if (one) {
    const Followed& f = seqs.begin()->second;
    const int n_gen = static_cast<int>(f.text.generated().size());
    // Stopped before its first token (a signal during the prompt): no
    // prefill or decode figures, rather than a rate over nothing.
    const bool started_decoding = f.first_token >= 0;
    const double prefill_tps = f.prompt.size() / std::max(f.first_token, 1e-9);
    const int steps = std::max(n_gen - 1, 1);  // decode steps
    auto figure = [&](double v) { return started_decoding ? nlohmann::json(v) : nlohmann::json(nullptr); };
    if (o.json) {
      j.update({{"prompt_ids", f.prompt},
                {"prefill_tokens_per_s", figure(prefill_tps)},
                {"time_to_first_token_s", figure(f.first_token)},
                {"generated_ids", f.text.generated()},
                {"text", f.shown},
                {"stop", f.text.stop()},
                {"decode_seconds", figure(seconds - f.first_token)},
                {"prefill_seconds", figure(f.first_token)},
                {"prefill_seconds_by_part", parts_json(gen.timings() - gs.decode)},
                {"decode_seconds_by_part", parts_json(gs.decode)}});
      j["decode_seconds_by_part"]["sampling"] = gs.decode_sampling_seconds;
      for (auto& rank : j["per_rank"])
        rank["exchange_seconds_per_token"] = rank["decode_exchange_seconds"].get<double>() / steps;
      if (o.top_logprobs > 0) j["logprobs"] = f.logprobs;
      print_json(j);
      return finish();
    }
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    for (size_t i = 0; i < f.logprobs.size(); ++i) log_info("token ", i, ": ", f.logprobs[i].dump());
    std::string exchange;
    if (mpi.size() > 1)
      exchange = cat("; ", mpi.size(), " ranks (", split_mode_name(m.shard.mode), " split, ",
                     transport_name(r.exchange.transport()), " exchange: up to ",
                     round_to(exchange_max / steps * 1e3, 0.01), " ms per token)");
    const std::string speed =
        started_decoding ? cat("prompt ", f.prompt.size(), " tokens at ", round_to(prefill_tps, 0.1),
                               " tok/s; first token after ", static_cast<int>(f.first_token * 1000), " ms; generated ",
                               n_gen, " tokens at ", round_to(decode_tps, 0.01), " tok/s (", f.text.stop(), ")")
                         : cat("prompt ", f.prompt.size(), " tokens; stopped (", f.text.stop(), ") after ",
                               round_to(seconds, 0.01), " s, before its first token");
    log_info(speed, "; ", setup.binding.threads, " thread(s) per rank", exchange, "; peak RSS ",
             static_cast<int>(peak_rss_mib()), " MiB");
    return finish();
  }
  if (o.json) {
    print_json(j);
    return finish();
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  log_info(n_seq, " sequences (", o.parallel, " at once): ", prompt_tokens, " prompt tokens, ", generated,
           " generated in ", round_to(seconds, 0.01), " s: ", round_to(throughput, 0.01), " tok/s in all, ", gs.steps,
           " steps; ", mpi.size(), " rank(s), ", split_mode_name(m.shard.mode), " split, ", setup.binding.threads,
           " thread(s) per rank");
  return finish();
}

}  // namespace tps
