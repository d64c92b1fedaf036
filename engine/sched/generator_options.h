// What a Generator is asked to hold (engine/sched/generator.h) and what
// that takes on a rank: the scheduler's limits, the KV pool's blocks and
// every buffer's bytes, from the shapes alone, so that a launcher checks
// them against the rank's memory before anything is allocated.
#pragma once

#include <cstdint>
#include <string>

#include "engine/cache/prompt_cache.h"
#include "engine/kernels/kernel_set.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/sched/scheduler.h"
#include "engine/step/forward.h"

namespace tps {

// The most drafted tokens a sequence checks a step with speculation on
// (--speculate auto); the drafter's own length adapts below it.
constexpr int kAutoDraftTokens = 16;
// The ended sequences' tokens rank 0 keeps for drafts to come from
// (DraftCorpus: about 44 bytes a token, so 11 MiB).
constexpr int64_t kDraftCorpusTokens = 1 << 18;

struct GeneratorOptions {
  int max_sequences = 1;  // running at once
  int step_tokens = 512;  // per step
  int context = 4096;     // positions per sequence
  int kv_positions = 0;   // the full-attention pool, in positions (0: context x max_sequences) ...
  uint64_t kv_bytes = 0;  // ... or the whole pool's bytes on each rank
  bool prefix_reuse = true;
  uint64_t cache_ram_bytes = 0;     // the prompt cache's RAM tier on each rank (--cache-ram; 0: none)
  std::string cache_dir;            // its disk tier (--cache-dir; "": none), within cache_ram_bytes per rank
  KvType kv_type = kDefaultKvType;  // the KV pool's keys and values (kernels/kv_format.h)
  int draft_tokens = 0;             // speculation: the most drafted tokens a sequence checks a step (0: none) ...
  bool draft_by_cost = false;       // ... as many as pay by the measured step cost (else every proposal)
  bool yarn_truncate = false;
  const KernelSet* kernels = nullptr;
};

// The scheduler's options and so the KV pool for these options on a rank
// with this shard (what the Generator uses; tpstopo --model shows it), and
// the bytes of that pool. Throws InputError for options that cannot work.
SchedulerOptions scheduler_options(const GeneratorOptions& options, const ModelConfig& config, const Shard& shard);
uint64_t kv_pool_bytes(const SchedulerOptions& options, KvType type, const ModelConfig& config, const Shard& shard);
// All a Generator with these options allocates on such a rank, whatever its
// threads: the KV pool, the forward pass's buffers, the logits and the RAM
// tier at its cap (the block tables' bookkeeping, under 1% of the pool,
// aside). From the shapes alone, so a launcher can check it against the
// rank's memory first.
uint64_t generator_bytes(const GeneratorOptions& options, const ModelConfig& config, const Shard& shard);
// The logits rows a step has at most (every sequence's next token and its
// draft's), and the forward pass's options.
uint64_t logit_rows(const GeneratorOptions& options);
ForwardOptions forward_options(const GeneratorOptions& options);
// The prompt cache's options on such a rank (the pool's blocks from the
// scheduler's options).
PromptCacheOptions prompt_cache_options(const GeneratorOptions& options, const SchedulerOptions& scheduler);

}  // namespace tps
