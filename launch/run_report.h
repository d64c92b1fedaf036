// What `tpsrun` generation reports when it is done: each sequence as rank 0
// followed it, every rank's share of the work (gathered on every rank), and
// from them the --json object or the texts and the summary line.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/sched/generator.h"
#include "engine/text/generated_text.h"
#include "launch/rank_run.h"
#include "launch/rank_setup.h"
#include "launch/run_options.h"

namespace tps {

// One sequence as rank 0 follows it.
struct Followed {
  Followed(int i, std::vector<int32_t> p, const TextOptions& t) : index(i), prompt(std::move(p)), text(t) {}
  int index;  // in the order given
  std::vector<int32_t> prompt;
  GeneratedText text;
  std::string shown;                        // the text so far
  int reused = 0;                           // prompt tokens from the prefix cache
  int restored = 0;                         // of those, from its RAM tier
  double first_token = -1, last_token = 0;  // seconds since the start
  nlohmann::json logprobs = nlohmann::json::array();
};

// What rank 0 saw of the run.
struct RunRecord {
  std::map<int, Followed> seqs;  // by the generator's id
  uint64_t seed = 0;             // sequence i sampled with seed + i
  int prompt_tokens = 0;
  // The decode phase is what follows the moment every sequence has its
  // first token: the tokens chosen after it, over its time.
  int decode_tokens = 0;
  double all_started = -1;  // seconds since the start; -1: not every one started
  double seconds = 0;       // the whole run's
};

nlohmann::json logprob_json(const Pick& pick);

// Per rank, gathered on every rank: what the summary line and --json report.
struct RankStats {
  int numa_node;
  double weight_bytes, on_node, decode_bytes_per_token, exchange_seconds, exchange_bytes, peak_rss_mib, kv_bytes,
      bytes_read, cache_ram_bytes;
  // The disk tier's (--cache-dir) on this rank: own files and bytes now, blocks loaded at start, written, failed.
  double cache_disk_files, cache_disk_bytes, cache_disk_loaded, cache_disk_written, cache_disk_write_failures;
  StepTimings decode;  // seconds by part of the forward pass in decode steps (Generator::Stats)
};

// Collective: every rank's.
std::vector<RankStats> gather_rank_stats(RankRun& run, const Generator& gen);

// Rank 0: prints the run (the --json object, or the texts on stdout and the
// summary on stderr), its texts flushed first.
void report_generation(const RunOptions& options, RunRecord& record, const std::vector<RankStats>& ranks,
                       const RankRun& run, const Generator& gen, const RankSetup& setup);

}  // namespace tps
