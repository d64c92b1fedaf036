#include "launch/generate_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "launch/json_output.h"
#include "launch/rank_run.h"
#include "launch/sequence.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/process.h"

namespace tps {
namespace {

nlohmann::json logprob_json(const Pick& p) {
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < p.n_top; ++i) top.push_back({p.top[i].id, p.top[i].logprob});
  return {{"id", p.id}, {"logprob", p.logprob}, {"top", top}};
}

// Per rank, gathered on every rank: what the summary line and --json report.
struct RankStats {
  int numa_node;
  double weight_bytes, on_node, decode_bytes_per_token, exchange_seconds, peak_rss_mib;
  Session::Timings decode;  // seconds by part of the forward pass, decode steps only
};

nlohmann::json parts_json(const Session::Timings& t) {
  return {{"qkv_projection", t.qkv}, {"attention", t.attention}, {"output_projection", t.output_proj},
          {"router", t.router},      {"experts", t.experts},     {"logits", t.logits},
          {"exchange", t.exchange}};
}

}  // namespace

int run_generate(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup) {
  SamplerParams sp = o.sampler;
  validate(sp);
  if (o.max_tokens < 0) throw InputError(cat("-n ", o.max_tokens, ": expected >= 0"));
  if (o.prompt.empty()) throw InputError("-p: the prompt is empty");
  const bool root = mpi.rank() == 0;

  RankRun r(o, mpi, setup, Clock::now());
  const Model& m = r.model;
  // One seed for every rank: rank 0's, random unless given.
  if (!o.seed_given) sp.seed = std::random_device{}();
  r.exchange.broadcast(&sp.seed, sizeof sp.seed, 0);

  Sequence seq(o, encode_prompt(o, m.tokenizer, o.prompt));
  const std::vector<int32_t>& prompt = seq.prompt();
  if (static_cast<int>(prompt.size()) > o.ctx)
    throw InputError(cat("the prompt is ", prompt.size(), " tokens, longer than the context of ", o.ctx,
                         " (use --ctx, up to ", m.config.n_ctx_train, ")"));

  Session session(m, r.session_options(o, o.ctx), r.pool, r.exchange);
  Sampler sampler(sp);

  auto t0 = Clock::now();
  std::vector<float> logits;
  session.forward(prompt, false, logits);
  const double prefill_s = seconds_since(t0);
  const Session::Timings prefill_parts = session.timings();

  nlohmann::json logprobs = nlohmann::json::array();
  std::string generated_text;
  double ttft = 0, sampling_s = 0;
  auto t1 = Clock::now();
  session.reset_timings();  // from here on: decode steps only
  r.exchange.reset_stats();
  while (!seq.done()) {
    auto ts = Clock::now();
    const Pick p = pick(r, logits, sampler, o.top_logprobs);
    sampling_s += seconds_since(ts);
    if (seq.generated().empty()) ttft = seconds_since(t0);
    if (o.top_logprobs > 0) logprobs.push_back(logprob_json(p));
    const std::string printable = seq.accept(p.id, m.tokenizer);
    generated_text += printable;
    if (!o.json && root) {
      std::fwrite(printable.data(), 1, printable.size(), stdout);
      std::fflush(stdout);
    }
    if (seq.done()) break;
    if (session.position() >= session.context()) {
      seq.finish("context full");
      break;
    }
    session.forward(std::vector<int32_t>{p.id}, false, logits);
  }
  const double decode_s = seconds_since(t1);
  const std::vector<int32_t>& out = seq.generated();
  const std::string& stop = seq.stop();
  std::string tail = seq.flush();
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
                        {"kernels", isa_name(best_kernel_set().isa)},
                        {"load_seconds", r.load_seconds},
                        {"decode_seconds", decode_s},
                        {"prefill_seconds", prefill_s},
                        {"peak_rss_mib", peak_rss_mib()},
                        {"per_rank", ranks}};
    if (o.top_logprobs > 0) j["logprobs"] = logprobs;
    j["prefill_seconds_by_part"] = parts_json(prefill_parts);
    j["decode_seconds_by_part"] = parts_json(session.timings());
    j["decode_seconds_by_part"]["sampling"] = sampling_s;
    print_json(j);
  } else {
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (o.top_logprobs > 0)
      for (size_t i = 0; i < logprobs.size(); ++i) log_info("token ", i, ": ", logprobs[i].dump());
    std::string exchange;
    if (mpi.size() > 1)
      exchange = cat("; ", mpi.size(), " ranks (", split_mode_name(m.shard.mode), " split, ",
                     transport_name(r.exchange.transport()), " exchange: up to ",
                     cat(static_cast<int>(exchange_max / steps * 1e5) / 100.0), " ms per token)");
    log_info("prompt ", prompt.size(), " tokens at ", cat(static_cast<int>(prefill_tps * 10) / 10.0),
             " tok/s; first token after ", cat(static_cast<int>(ttft * 1000)), " ms; generated ", n_gen, " tokens at ",
             cat(static_cast<int>(decode_tps * 100) / 100.0), " tok/s (", stop, "); ", setup.binding.threads,
             " thread(s) per rank", exchange, "; peak RSS ", cat(static_cast<int>(peak_rss_mib())), " MiB");
  }
  return 0;
}

}  // namespace tps
