#include "launch/generate_command.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/forward.h"
#include "engine/harmony.h"
#include "engine/model.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "topology/binding.h"

namespace tps {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

// --split auto: a single stream runs best split inside every layer, where
// each rank reads its share of every weight a token uses (tensor); see
// docs/PERFORMANCE.md for the measurements behind the rule.
SplitMode choose_split(const std::string& split) {
  return split == "auto" ? SplitMode::tensor : parse_split_mode(split);
}

std::string range_text(const Range& r) {
  return r.size() == 0 ? "none" : cat(r.begin, "-", r.end - 1);
}

// What a shard holds, in the words of its mode.
std::string shard_text(const Shard& s) {
  const RankShare& x = s.share;
  if (s.mode == SplitMode::layers)
    return cat("layers ", range_text(x.layers), x.vocab.size() ? ", output head" : "");
  std::string what = cat("KV heads ", range_text(x.kv_heads), ", ");
  what += s.mode == SplitMode::experts ? cat("experts ", range_text(x.experts))
                                       : cat("features ", range_text(x.ff), " of every expert");
  return what + cat(", vocabulary rows ", range_text(x.vocab));
}

// Everything a rank holds for a run: its pinned threads, its shard of the
// model in its own memory, and the exchange with the other ranks.
struct RankRun {
  ThreadPool pool;
  Model model;
  Exchange exchange;
  double load_seconds = 0;
  int numa_node = -1;       // OS index of the rank's node
  double on_node = -1;      // fraction of its weight pages there, from the kernel

  RankRun(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup, Clock::time_point t0)
      : pool(make_pool(setup.binding.threads, setup.thread_pus)),
        model(load(o, mpi, pool)),
        exchange(mpi, o.exchange, static_cast<size_t>(o.batch) * model.config.n_embd),
        load_seconds(since(t0)) {
    // Once every rank on the host has its copy, the file's pages can go.
    exchange.barrier();
    if (mpi.local_rank() == 0) drop_file_cache(model.file);
    report(mpi, setup);
  }

  const Shard& shard() const { return model.shard; }
  bool pipeline() const { return shard().mode == SplitMode::layers; }
  int last_rank() const { return shard().ranks - 1; }

 private:
  static ThreadPool make_pool(int threads, const std::vector<int>& pus) {
    if (!pus.empty()) bind_this_thread({pus[0]});
    return ThreadPool(threads, [&pus](int t) {
      if (!pus.empty()) bind_this_thread({pus[t % pus.size()]});
    });
  }

  static Model load(const RunOptions& o, const MpiSession& mpi, ThreadPool& pool) {
    bool shown = false;
    int last_percent = -1;
    Model m = load_model(
        o.model, pool, choose_split(o.split), mpi.rank(), mpi.size(),
        [&](uint64_t done, uint64_t total) {
          // Rank 0 shows its own progress; the others load alongside.
          if (mpi.rank() != 0 || total < (1ull << 30) || log_level() < LogLevel::info) return;
          const int percent = static_cast<int>(100 * done / total);
          if (percent / 5 == last_percent / 5) return;
          last_percent = percent;
          std::fprintf(stderr, "\rtps: loading %s: %3d%% of %.1f GB", o.model.c_str(), percent,
                       total / 1e9);
          shown = true;
        });
    if (shown) std::fputc('\n', stderr);
    return m;
  }

  // One line per rank (printed by rank 0 in rank order): what it owns, how
  // many bytes, and where the kernel says its pages are.
  void report(const MpiSession& mpi, const RankSetup& setup) {
    const Shard& s = shard();
    const int node = numa_node = setup.machine.numa_nodes.at(setup.binding.numa_node).os_index;
    const PageBuffer& mem = model.weights.memory;
    on_node = fraction_on_node(mem.data(), mem.size(), node);
    std::string line = cat("rank ", s.rank, "/", s.ranks, ": ", split_mode_name(s.mode), " split: ",
                           shard_text(s), "; ", cat(static_cast<int>(mem.size() / 1e6)),
                           " MB of weights in its own memory, ",
                           on_node < 0 ? std::string("page placement unknown")
                                       : cat(static_cast<int>(on_node * 1000) / 10.0,
                                             "% of sampled pages on NUMA node ", node),
                           "; ready in ", cat(static_cast<int>(load_seconds * 10) / 10.0), " s");
    std::vector<std::string> idle = idle_parts(s.share, s.mode);
    if (!idle.empty()) {
      line += "; warning: holds no ";
      for (size_t i = 0; i < idle.size(); ++i) line += (i ? ", " : "") + idle[i];
      line += cat(" (", s.ranks, " ranks are more than this model has of them)");
    }
    std::vector<std::string> lines = mpi.gather_to_root(line);
    if (mpi.rank() == 0) {
      const ModelConfig& c = model.config;
      log_info("tps: model ", model.file.path(), ": ", c.n_layer, " layers, ", c.n_expert,
               " experts (top-", c.n_expert_used, "), d=", c.n_embd, "; kernels ",
               isa_name(best_dot_kernels().isa), "; exchange ", transport_name(exchange.transport()));
      for (const std::string& l : lines) log_info("tps: ", l);
    }
  }
};

// A chosen token and, when asked, its log-probability and the top ones.
struct Pick {
  int32_t id = -1;
  float logprob = 0;
  int n_top = 0;
  TokenLogprob top[100];
};

// Decides the next token on every rank: split inside layers, the ranks
// decide together from their vocabulary rows; split by layers, the last
// rank decides alone and tells the others.
Pick pick(RankRun& r, std::span<const float> logits, Sampler& sampler, int top_k) {
  const ModelConfig& c = r.model.config;
  Pick p;
  auto decide = [&](const SplitLogits& s) {
    p.id = sampler.sample(s);
    if (top_k <= 0) return;
    p.logprob = logprob_of(s, p.id);
    for (const TokenLogprob& t : top_logprobs(s, top_k)) p.top[p.n_top++] = t;
  };
  if (!r.pipeline()) {
    decide(SplitLogits{logits, r.shard().share.vocab.begin, c.n_vocab, r.exchange});
    return p;
  }
  if (r.shard().rank == r.last_rank()) {
    Exchange alone;
    decide(SplitLogits{logits, 0, c.n_vocab, alone});
  }
  r.exchange.broadcast(&p, sizeof p, r.last_rank());
  return p;
}

nlohmann::json logprob_json(const Pick& p) {
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < p.n_top; ++i) top.push_back({p.top[i].id, p.top[i].logprob});
  return {{"id", p.id}, {"logprob", p.logprob}, {"top", top}};
}

SessionOptions session_options(const RunOptions& o, int ctx) {
  SessionOptions so;
  so.n_ctx = ctx;
  so.max_batch = o.batch;
  so.yarn_truncate = o.yarn_truncate;
  return so;
}

// Per rank, gathered on every rank: what the summary line and --json report.
struct RankStats {
  int numa_node;
  double weight_bytes, on_node, decode_bytes_per_token, exchange_seconds, peak_rss_mib;
  Session::Timings decode;  // seconds by part of the forward pass, decode steps only
};

nlohmann::json parts_json(const Session::Timings& t) {
  return {{"qkv_projection", t.qkv},     {"attention", t.attention},
          {"output_projection", t.output_proj}, {"router", t.router},
          {"experts", t.experts},        {"logits", t.logits},
          {"exchange", t.exchange}};
}

}  // namespace

int run_generate(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup) {
  SamplerParams sp = o.sampler;
  validate(sp);
  if (o.max_tokens < 0) throw InputError(cat("-n ", o.max_tokens, ": expected >= 0"));
  if (o.prompt.empty()) throw InputError("-p: the prompt is empty");
  const bool root = mpi.rank() == 0;

  const auto t_start = Clock::now();
  RankRun r(o, mpi, setup, t_start);
  const Model& m = r.model;
  // One seed for every rank: rank 0's, random unless given.
  if (!o.seed_given) sp.seed = std::random_device{}();
  r.exchange.broadcast(&sp.seed, sizeof sp.seed, 0);

  std::vector<int32_t> prompt =
      o.chat ? render_chat_prompt(o.prompt, ChatOptions{"", o.reasoning, ""},
                                  [&](const std::string& s) { return m.tokenizer.encode(s); })
             : m.tokenizer.encode(o.prompt, true);
  if (static_cast<int>(prompt.size()) > o.ctx)
    throw InputError(cat("the prompt is ", prompt.size(), " tokens, longer than the context of ",
                         o.ctx, " (use --ctx, up to ", m.config.n_ctx_train, ")"));

  Session session(m, session_options(o, o.ctx), r.pool, r.exchange);
  Sampler sampler(sp);

  auto t0 = Clock::now();
  std::vector<float> logits;
  session.forward(prompt, false, logits);
  const double prefill_s = since(t0);

  std::vector<int32_t> out;
  nlohmann::json logprobs = nlohmann::json::array();
  Utf8Stream text;
  HarmonyStream harmony;
  std::string generated_text;
  std::string stop = "length";
  double ttft = 0, sampling_s = 0;
  auto t1 = Clock::now();
  session.reset_timings();  // from here on: decode steps only
  r.exchange.reset_stats();
  for (int i = 0; i < o.max_tokens; ++i) {
    auto ts = Clock::now();
    const Pick p = pick(r, logits, sampler, o.top_logprobs);
    sampling_s += since(ts);
    const int32_t id = p.id;
    if (i == 0) ttft = since(t0);
    out.push_back(id);
    if (o.top_logprobs > 0) logprobs.push_back(logprob_json(p));
    if (is_stop_token(id)) {
      stop = "stop token";
      break;
    }
    const std::string& piece = m.tokenizer.token_bytes(id);
    bool show = true;
    if (o.chat) {
      HarmonyStream::Step st = harmony.push(id, piece);
      show = st.part == HarmonyStream::Part::content &&
             (st.channel.starts_with("final") || (o.show_analysis && !st.channel.empty()));
    }
    if (show) {
      std::string printable = text.push(piece);
      generated_text += printable;
      if (!o.json && root) {
        std::fwrite(printable.data(), 1, printable.size(), stdout);
        std::fflush(stdout);
      }
    }
    if (i + 1 == o.max_tokens) break;
    if (session.position() >= session.context()) {
      stop = "context full";
      break;
    }
    session.forward(std::vector<int32_t>{id}, false, logits);
  }
  const double decode_s = since(t1);
  std::string tail = text.flush();
  generated_text += tail;
  const int n_gen = static_cast<int>(out.size());
  // Decode speed counts the forward steps after the first token.
  const int steps = std::max(n_gen - 1, 1);
  const double decode_tps = n_gen > 1 ? (n_gen - 1) / std::max(decode_s, 1e-9) : 0;
  const double prefill_tps = prompt.size() / std::max(prefill_s, 1e-9);

  const RankStats mine{r.numa_node,
                       static_cast<double>(m.weights.memory.size()),
                       r.on_node,
                       static_cast<double>(decode_bytes_per_token(m.weights.views, m.config, m.shard)),
                       r.exchange.stats().seconds,
                       peak_rss_mib(),
                       session.timings()};
  std::vector<RankStats> all(mpi.size());
  r.exchange.all_gather(&mine, all.data(), sizeof mine);
  if (!root) return 0;

  double bytes_per_token = 0, exchange_max = 0;
  nlohmann::json ranks = nlohmann::json::array();
  for (int q = 0; q < mpi.size(); ++q) {
    const RankStats& x = all[q];
    bytes_per_token += x.decode_bytes_per_token;
    exchange_max = std::max(exchange_max, x.exchange_seconds);
    ranks.push_back({{"rank", q},
                     {"numa_node", x.numa_node},
                     {"weight_bytes", x.weight_bytes},
                     {"weight_pages_on_node", x.on_node},
                     {"decode_weight_bytes_per_token", x.decode_bytes_per_token},
                     {"exchange_seconds_per_token", x.exchange_seconds / steps},
                     {"peak_rss_mib", x.peak_rss_mib},
                     {"decode_seconds_by_part", parts_json(x.decode)}});
  }
  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"prompt_tokens", prompt.size()},
                        {"prompt_ids", prompt},
                        {"prefill_tokens_per_s", prefill_tps},
                        {"time_to_first_token_s", ttft},
                        {"generated_tokens", n_gen},
                        {"generated_ids", out},
                        {"text", generated_text},
                        {"decode_tokens_per_s", decode_tps},
                        {"decode_weight_bytes_per_token", bytes_per_token},
                        {"stop", stop},
                        {"seed", sp.seed},
                        {"split", split_mode_name(m.shard.mode)},
                        {"ranks", mpi.size()},
                        {"exchange", transport_name(r.exchange.transport())},
                        {"threads", setup.binding.threads},
                        {"kernels", isa_name(best_dot_kernels().isa)},
                        {"load_seconds", r.load_seconds},
                        {"decode_seconds", decode_s},
                        {"prefill_seconds", prefill_s},
                        {"peak_rss_mib", peak_rss_mib()},
                        {"per_rank", ranks}};
    if (o.top_logprobs > 0) j["logprobs"] = logprobs;
    j["decode_seconds_by_part"] = parts_json(session.timings());
    j["decode_seconds_by_part"]["sampling"] = sampling_s;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (o.top_logprobs > 0)
      for (size_t i = 0; i < logprobs.size(); ++i)
        std::fprintf(stderr, "tps: token %zu: %s\n", i, logprobs[i].dump().c_str());
    std::string exchange;
    if (mpi.size() > 1)
      exchange = cat("; ", mpi.size(), " ranks (", split_mode_name(m.shard.mode), " split, ",
                     transport_name(r.exchange.transport()), " exchange: up to ",
                     cat(static_cast<int>(exchange_max / steps * 1e5) / 100.0), " ms per token)");
    log_info("tps: prompt ", prompt.size(), " tokens at ",
             cat(static_cast<int>(prefill_tps * 10) / 10.0), " tok/s; first token after ",
             cat(static_cast<int>(ttft * 1000)), " ms; generated ", n_gen, " tokens at ",
             cat(static_cast<int>(decode_tps * 100) / 100.0), " tok/s (", stop, "); ",
             setup.binding.threads, " thread(s) per rank", exchange, "; peak RSS ",
             cat(static_cast<int>(peak_rss_mib())), " MiB");
  }
  return 0;
}

int run_score(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup) {
  std::ifstream in(o.ids_file);
  if (!in) throw InputError(cat(o.ids_file, ": cannot read the token ids"));
  std::vector<int32_t> ids;
  for (std::string word; in >> word;) {
    try {
      size_t used = 0;
      long v = std::stol(word, &used);
      if (used != word.size()) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw InputError(cat(o.ids_file, ": '", word, "' is not a token id"));
    }
  }
  if (ids.size() < 2) throw InputError(cat(o.ids_file, ": need at least 2 token ids to score"));
  RankRun r(o, mpi, setup, Clock::now());
  const Model& m = r.model;
  Session session(m, session_options(o, std::max<int>(o.ctx, static_cast<int>(ids.size()))),
                  r.pool, r.exchange);
  std::vector<float> logits;
  auto t0 = Clock::now();
  session.forward(ids, true, logits);
  const double s = since(t0);

  // Each position's log-probabilities: by all ranks together from their
  // vocabulary rows, or by the last rank of a pipeline alone.
  const int64_t rows = m.weights.views.output.rows;
  const int k = std::max(o.top_logprobs, 1);
  nlohmann::json positions = nlohmann::json::array();
  if (!r.pipeline() || m.shard.rank == r.last_rank()) {
    Exchange alone;
    Exchange& ex = r.pipeline() ? alone : r.exchange;
    const int64_t begin = r.pipeline() ? 0 : m.shard.share.vocab.begin;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      SplitLogits row{std::span<const float>(logits.data() + i * rows, rows), begin, m.config.n_vocab, ex};
      nlohmann::json top = nlohmann::json::array();
      for (const TokenLogprob& t : top_logprobs(row, k)) top.push_back({t.id, t.logprob});
      positions.push_back({{"pos", i},
                           {"next", ids[i + 1]},
                           {"next_logprob", logprob_of(row, ids[i + 1])},
                           {"top", top}});
    }
  }
  if (r.pipeline()) {  // the last rank's results to rank 0, which prints
    std::string text = positions.dump();
    uint64_t size = text.size();
    r.exchange.broadcast(&size, sizeof size, r.last_rank());
    text.resize(size);
    r.exchange.broadcast(text.data(), size, r.last_rank());
    positions = nlohmann::json::parse(text);
  }
  if (mpi.rank() != 0) return 0;
  nlohmann::json j = {{"engine", "tps"},
                      {"model", o.model},
                      {"tokens", ids.size()},
                      {"seconds", s},
                      {"split", split_mode_name(m.shard.mode)},
                      {"ranks", mpi.size()},
                      {"yarn_truncate", o.yarn_truncate},
                      {"positions", positions}};
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (const auto& p : positions)
      std::printf("%4d next %6d logprob %8.4f top %s\n", p["pos"].get<int>(), p["next"].get<int>(),
                  p["next_logprob"].get<float>(), p["top"].dump().c_str());
  }
  return 0;
}

}  // namespace tps
