#include "launch/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "engine/kernels/kernel_set.h"
#include "launch/json_output.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/process.h"

namespace tps {
namespace {

nlohmann::json parts_json(const StepTimings& t) {
  return {{"qkv_projection", t.qkv}, {"attention", t.attention}, {"output_projection", t.output_proj},
          {"router", t.router},      {"experts", t.experts},     {"logits", t.logits},
          {"exchange", t.exchange}};
}

int generated_tokens(const RunRecord& rec) {
  int generated = 0;
  for (const auto& [id, f] : rec.seqs) generated += static_cast<int>(f.text.generated().size());
  return generated;
}

nlohmann::json per_rank_json(const std::vector<RankStats>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t q = 0; q < ranks.size(); ++q) {
    const RankStats& x = ranks[q];
    out.push_back({{"rank", q},
                   {"numa_node", x.numa_node},
                   {"weight_bytes", x.weight_bytes},
                   {"weight_pages_on_node", x.on_node},
                   {"kv_bytes", x.kv_bytes},
                   {"cache_ram_bytes", x.cache_ram_bytes},
                   {"cache_disk_files", x.cache_disk_files},
                   {"cache_disk_bytes", x.cache_disk_bytes},
                   {"cache_disk_loaded_blocks", x.cache_disk_loaded},
                   {"cache_disk_written_blocks", x.cache_disk_written},
                   {"cache_disk_write_failures", x.cache_disk_write_failures},
                   {"weight_bytes_read", x.bytes_read},
                   {"decode_weight_bytes_per_token", x.decode_bytes_per_token},
                   {"decode_exchange_seconds", x.exchange_seconds},
                   {"decode_exchange_bytes", x.exchange_bytes},
                   {"peak_rss_mib", x.peak_rss_mib},
                   {"decode_seconds_by_part", parts_json(x.decode)}});
  }
  return out;
}

// The prefix cache's RAM tier: its slots and traffic (rank 0's index).
nlohmann::json prompt_cache_json(const Scheduler& s) {
  const Scheduler::TierStats& t = s.tier_stats();
  return {{"ram_full_blocks", s.tier().slots(BlockKind::full)},
          {"ram_sliding_blocks", s.tier().slots(BlockKind::sliding)},
          {"ram_saved_blocks", t.saved},
          {"ram_restored_blocks", t.restored},
          {"ram_evicted_blocks", s.tier().evictions()},
          {"ram_hits", t.hits},
          {"ram_misses", t.misses}};
}

// Speculative decoding: the drafts checked, their tokens, those taken.
nlohmann::json speculation_json(const Scheduler& s) {
  const Scheduler::DraftStats& d = s.draft_stats();
  return {{"draft_tokens", s.options().draft_tokens},
          {"verify_steps", d.verifies},
          {"drafted_tokens", d.drafted},
          {"taken_tokens", d.taken}};
}

// What --json says of every run.
nlohmann::json run_json(const RunOptions& o, const RunRecord& rec, const std::vector<RankStats>& ranks,
                        const RankRun& r, const Generator& gen, const RankSetup& setup) {
  const Generator::Stats& gs = gen.stats();
  nlohmann::json step_tokens = nlohmann::json::object();
  for (auto [tokens, count] : gs.step_tokens) step_tokens[std::to_string(tokens)] = count;
  double bytes_per_token = 0, bytes_read = 0;
  for (const RankStats& x : ranks) bytes_per_token += x.decode_bytes_per_token, bytes_read += x.bytes_read;
  return {{"model", o.model},
          {"split", split_mode_name(r.model.shard.mode)},
          {"ranks", ranks.size()},
          {"exchange", transport_name(r.exchange.transport())},
          {"threads", setup.binding.threads},
          {"kernels", isa_name(best_kernel_set().isa)},
          {"kv_type", kv_type_name(gen.kv().type())},
          {"seed", rec.seed},
          {"load_seconds", r.load_seconds},
          {"prompt_tokens", rec.prompt_tokens},
          {"generated_tokens", generated_tokens(rec)},
          {"seconds", rec.seconds},
          {"steps", gs.steps},
          {"decode_steps", gs.decode_steps},
          {"decode_step_tokens", gs.decode_tokens},
          {"step_tokens", step_tokens},
          {"weight_bytes_read_per_step", bytes_read / std::max<int64_t>(gs.steps, 1)},
          {"decode_weight_bytes_per_token", bytes_per_token},
          {"peak_rss_mib", peak_rss_mib()},
          {"prompt_cache", prompt_cache_json(gen.scheduler())},
          {"speculation", speculation_json(gen.scheduler())},
          {"per_rank", per_rank_json(ranks)}};
}

// Every sequence's record (their held-back text flushed into `shown`), and
// the texts as printed without --json.
nlohmann::json sequences_json(const RunOptions& o, RunRecord& rec, std::string& texts) {
  nlohmann::json sequences = nlohmann::json::array();
  for (auto& [id, f] : rec.seqs) {
    f.shown += f.text.flush();
    sequences.push_back({{"prompt_tokens", f.prompt.size()},
                         {"reused_prompt_tokens", f.reused},
                         {"restored_prompt_tokens", f.restored},
                         {"generated_ids", f.text.generated()},
                         {"text", f.shown},
                         {"stop", f.text.stop()},
                         {"time_to_first_token_s", f.first_token},
                         {"seconds", f.last_token}});
    if (o.top_logprobs > 0) sequences.back()["logprobs"] = f.logprobs;
    texts += cat("--- sequence ", f.index, " (", f.text.generated().size(), " tokens, ", f.text.stop(), ") ---\n",
                 f.shown, "\n");
  }
  return sequences;
}

// One sequence: the classic fields of a single stream (what bench/e2e and
// tpsbench read), or its text's tail and the summary line. `tail` is what
// its text held back, not yet printed.
void report_one(const RunOptions& o, const RunRecord& rec, nlohmann::json& j, const std::string& tail,
                const std::vector<RankStats>& ranks, const RankRun& r, const Generator& gen, const RankSetup& setup) {
  const Generator::Stats& gs = gen.stats();
  const Followed& f = rec.seqs.begin()->second;
  const int n_gen = static_cast<int>(f.text.generated().size());
  // Stopped before its first token (a signal during the prompt): no
  // prefill or decode figures, rather than a rate over nothing.
  const bool started_decoding = f.first_token >= 0;
  const double prefill_tps = f.prompt.size() / std::max(f.first_token, 1e-9);
  const double decode_tps = rec.decode_tokens / std::max(rec.seconds - rec.all_started, 1e-9);
  const int steps = std::max(n_gen - 1, 1);  // decode steps
  auto figure = [&](double v) { return started_decoding ? nlohmann::json(v) : nlohmann::json(nullptr); };
  if (o.json) {
    j.update({{"prompt_ids", f.prompt},
              {"prefill_tokens_per_s", figure(prefill_tps)},
              {"time_to_first_token_s", figure(f.first_token)},
              {"generated_ids", f.text.generated()},
              {"text", f.shown},
              {"stop", f.text.stop()},
              {"decode_seconds", figure(rec.seconds - f.first_token)},
              {"prefill_seconds", figure(f.first_token)},
              {"prefill_seconds_by_part", parts_json(gen.timings() - gs.decode)},
              {"decode_seconds_by_part", parts_json(gs.decode)}});
    j["decode_seconds_by_part"]["sampling"] = gs.decode_sampling_seconds;
    for (auto& rank : j["per_rank"]) {
      rank["exchange_seconds_per_token"] = rank["decode_exchange_seconds"].get<double>() / steps;
      rank["exchange_bytes_per_token"] = rank["decode_exchange_bytes"].get<double>() / steps;
    }
    if (o.top_logprobs > 0) j["logprobs"] = f.logprobs;
    print_json(j);
    return;
  }
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  for (size_t i = 0; i < f.logprobs.size(); ++i) log_info("token ", i, ": ", f.logprobs[i].dump());
  double exchange_max = 0;
  for (const RankStats& x : ranks) exchange_max = std::max(exchange_max, x.exchange_seconds);
  std::string exchange;
  if (ranks.size() > 1)
    exchange = cat("; ", ranks.size(), " ranks (", split_mode_name(r.model.shard.mode), " split, ",
                   transport_name(r.exchange.transport()), " exchange: up to ",
                   fmt::format("{:.2f}", exchange_max / steps * 1e3), " ms per token)");
  const std::string speed =
      started_decoding ? cat("prompt ", f.prompt.size(), " tokens at ", fmt::format("{:.1f}", prefill_tps),
                             " tok/s; first token after ", static_cast<int>(f.first_token * 1000), " ms; generated ",
                             n_gen, " tokens at ", fmt::format("{:.2f}", decode_tps), " tok/s (", f.text.stop(), ")")
                       : cat("prompt ", f.prompt.size(), " tokens; stopped (", f.text.stop(), ") after ",
                             fmt::format("{:.2f}", rec.seconds), " s, before its first token");
  log_info(speed, "; ", setup.binding.threads, " thread(s) per rank", exchange, "; peak RSS ",
           static_cast<int>(peak_rss_mib()), " MiB");
}

}  // namespace

nlohmann::json logprob_json(const Pick& p) {
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < p.n_top; ++i) top.push_back({p.top[i].id, p.top[i].logprob});
  return {{"id", p.id}, {"logprob", p.logprob}, {"top", top}};
}

std::vector<RankStats> gather_rank_stats(RankRun& r, const Generator& gen) {
  const Model& m = r.model;
  const DiskTier::Stats& disk = gen.disk().stats();
  const RankStats mine{r.numa_node,
                       static_cast<double>(m.weights.memory.size()),
                       r.on_node,
                       static_cast<double>(decode_bytes_per_token(m.weights.views, m.config, m.shard)),
                       gen.stats().decode_exchange_seconds,
                       static_cast<double>(gen.stats().decode_exchange_bytes),
                       peak_rss_mib(),
                       static_cast<double>(gen.kv().bytes()),
                       static_cast<double>(gen.weight_bytes_read()),
                       static_cast<double>(gen.tier().bytes()),
                       static_cast<double>(disk.files),
                       static_cast<double>(disk.bytes),
                       static_cast<double>(disk.loaded),
                       static_cast<double>(disk.written),
                       static_cast<double>(disk.write_failures),
                       gen.stats().decode};
  std::vector<RankStats> all(r.exchange.size());
  r.exchange.all_gather(&mine, all.data(), sizeof mine);
  return all;
}

void report_generation(const RunOptions& o, RunRecord& rec, const std::vector<RankStats>& ranks, const RankRun& r,
                       const Generator& gen, const RankSetup& setup) {
  nlohmann::json j = run_json(o, rec, ranks, r, gen, setup);
  std::string texts;
  const std::string tail = rec.seqs.size() == 1 ? rec.seqs.begin()->second.text.flush() : "";
  if (rec.seqs.size() == 1) rec.seqs.begin()->second.shown += tail;
  j["sequences"] = sequences_json(o, rec, texts);
  const int generated = generated_tokens(rec);
  const double throughput = generated / std::max(rec.seconds, 1e-9);
  j.update({{"parallel", o.parallel},
            {"throughput_tokens_per_s", throughput},
            {"all_first_tokens_s", rec.all_started},
            {"decode_tokens_per_s", rec.decode_tokens / std::max(rec.seconds - rec.all_started, 1e-9)}});
  if (rec.seqs.size() == 1) return report_one(o, rec, j, tail, ranks, r, gen, setup);
  if (o.json) return print_json(j);
  std::fwrite(texts.data(), 1, texts.size(), stdout);
  log_info(rec.seqs.size(), " sequences (", o.parallel, " at once): ", rec.prompt_tokens, " prompt tokens, ", generated,
           " generated in ", fmt::format("{:.2f}", rec.seconds), " s: ", fmt::format("{:.2f}", throughput),
           " tok/s in all, ", gen.stats().steps, " steps; ", ranks.size(), " rank(s), ",
           split_mode_name(r.model.shard.mode), " split, ", setup.binding.threads, " thread(s) per rank");
}

}  // namespace tps
