#include "launch/sweep_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "launch/cli.h"
#include "launch/json_output.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/log.h"

namespace tps {

namespace {

// Token ids spread over the ordinary vocabulary (below the special tokens),
// the same on every rank.
std::vector<int32_t> sweep_tokens(int n, int32_t vocab) {
  std::vector<int32_t> ids(n);
  uint64_t state = 0;
  for (int32_t& id : ids) id = static_cast<int32_t>(splitmix64(state) % static_cast<uint64_t>(vocab));
  return ids;
}

}  // namespace

RunMode add_sweep_command(CLI::App& app, SweepOptions& sweep) {
  CLI::App* command = app.add_subcommand(
      "sweep",
      "speed against the KV cache's depth, as llama-sweep-bench: the cache filled in chunks of --batch tokens up "
      "to --ctx, --tg tokens decoded before each chunk (uses -m, --ctx, --batch, --kv-type, --split, --json)");
  command->add_option("--tg", sweep.tg, "tokens decoded at each depth")->check(kPositive)->capture_default_str();
  command->fallthrough();
  return {command, {run_group::model, run_group::output}};
}

int run_sweep(const RunOptions& options, const SweepOptions& sweep, const MpiSession& mpi, const RankSetup& setup) {
  if (sweep.tg < 1) throw InputError(cat("--tg ", sweep.tg, ": expected at least 1 token"));
  const int chunk = options.step_tokens, ctx = options.context;
  if (chunk + sweep.tg > ctx)
    throw InputError(
        cat("--ctx ", ctx, ": a sweep needs room for one chunk of --batch ", chunk, " and --tg ", sweep.tg, " tokens"));
  RankRun r(options, mpi, setup, Clock::now());
  const Model& m = r.model;
  Session session(m, r.session_options(options, ctx), r.pool, r.exchange);
  // The ordinary tokens: o200k_harmony's specials start at 199998.
  const int32_t ordinary = std::min<int32_t>(static_cast<int32_t>(m.config.n_vocab), 199998);
  const std::vector<int32_t> ids = sweep_tokens(ctx, ordinary);
  const KvType type = options.kv_type;
  // Bytes a position takes in all the rank's full-attention layers, and in
  // its sliding ones (which read at most their window).
  const double full_position =
      static_cast<double>(KvPool::block_bytes(m.config, m.shard, type, BlockKind::full)) / kKvBlock;
  const double sliding_position =
      static_cast<double>(KvPool::block_bytes(m.config, m.shard, type, BlockKind::sliding)) / kKvBlock;
  const double window = m.config.sliding_window;

  const bool root = mpi.rank() == 0;
  if (root && !options.json)
    std::printf("| %6s | %6s | %6s | %8s | %8s | %8s | %8s | %6s | %10s |\n|%s|\n", "PP", "TG", "N_KV", "T_PP s",
                "S_PP t/s", "T_TG s", "S_TG t/s", "attn %", "KV MB/tok",
                "--------|--------|--------|----------|----------|----------|----------|--------|------------");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<float> logits;
  for (int at = 0; at + sweep.tg + chunk <= ctx;) {
    const int n_kv = at;
    // Decode at this depth: one token a step.
    const StepTimings before = session.timings();
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < sweep.tg; ++i) session.forward(std::span<const int32_t>(ids).subspan(at++, 1), false, logits);
    r.exchange.barrier();  // a pipeline's first stage is done before its last
    const double tg_seconds = seconds_since(t0);
    const StepTimings decode = session.timings() - before;
    // The next chunk of prompt at that depth.
    const Clock::time_point t1 = Clock::now();
    session.forward(std::span<const int32_t>(ids).subspan(at, chunk), false, logits);
    r.exchange.barrier();
    const double pp_seconds = seconds_since(t1);
    at += chunk;
    // All ranks': the KV bytes a token reads (at the decode's middle depth),
    // and the attention's seconds -- which a pipeline's stages spend one
    // after another, and ranks split inside layers side by side.
    const double depth = n_kv + sweep.tg / 2.0;
    int64_t totals[2] = {static_cast<int64_t>(depth * full_position + std::min(depth, window) * sliding_position),
                         static_cast<int64_t>(decode.attention * 1e9)};
    r.exchange.sum(totals, 2);
    const double kv_mb = static_cast<double>(totals[0]) / (1024.0 * 1024.0);
    const double attention =
        static_cast<double>(totals[1]) * 1e-9 / (r.pipeline() ? 1 : mpi.size()) / std::max(tg_seconds, 1e-12);
    if (!root) continue;
    rows.push_back({{"n_kv", n_kv},
                    {"pp_tokens", chunk},
                    {"pp_seconds", pp_seconds},
                    {"pp_tokens_per_s", chunk / pp_seconds},
                    {"tg_tokens", sweep.tg},
                    {"tg_seconds", tg_seconds},
                    {"tg_tokens_per_s", sweep.tg / tg_seconds},
                    {"attention_share", attention},
                    {"kv_mib_per_token", kv_mb}});
    if (!options.json)
      std::printf("| %6d | %6d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %6.1f | %10.2f |\n", chunk, sweep.tg, n_kv,
                  pp_seconds, chunk / pp_seconds, tg_seconds, sweep.tg / tg_seconds, 100 * attention, kv_mb);
    else  // the JSON comes whole at the end: meanwhile a line a depth on stderr
      log_info("sweep: depth ", n_kv, ": decode ", fmt::format("{:.2f}", sweep.tg / tg_seconds), " tok/s, prefill ",
               fmt::format("{:.1f}", chunk / pp_seconds), " tok/s");
    std::fflush(stdout);
  }
  if (root && options.json)
    print_json({{"engine", "tps"},
                {"model", options.model},
                {"split", split_mode_name(m.shard.mode)},
                {"ranks", mpi.size()},
                {"threads", r.pool.size()},
                {"kv_type", kv_type_name(type)},
                {"rows", rows}});
  return 0;
}

}  // namespace tps
