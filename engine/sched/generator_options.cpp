#include "engine/sched/generator_options.h"

#include <algorithm>
#include <climits>

#include "engine/text/harmony.h"
#include "runtime/error.h"

namespace tps {

namespace {

// Blocks of one kind a pool holds at most: their positions must count in
// an int.
constexpr int64_t kMaxPoolBlocks = INT32_MAX / kKvBlock;

}  // namespace

SchedulerOptions scheduler_options(const GeneratorOptions& o, const ModelConfig& c, const Shard& shard) {
  if (o.max_sequences < 1) throw InputError(cat("--parallel ", o.max_sequences, ": expected at least 1 sequence"));
  if (o.step_tokens < o.max_sequences)
    throw InputError(cat("--batch ", o.step_tokens, " is less than --parallel ", o.max_sequences,
                         ": a step must carry every running sequence's next token"));
  if (o.kv_positions < 0) throw InputError(cat("--kv-size ", o.kv_positions, ": expected a number of positions"));
  SchedulerOptions s;
  s.max_sequences = o.max_sequences;
  s.step_tokens = o.step_tokens;
  s.context = o.context;
  s.window = static_cast<int>(c.sliding_window);
  s.stages = shard.mode == SplitMode::layers ? shard.ranks : 1;
  s.prefix_reuse = o.prefix_reuse;
  s.boundary_token = harmony::kStart;  // harmony's messages begin with <|start|>
  if (o.draft_tokens < 0) throw InputError(cat("draft tokens ", o.draft_tokens, ": expected 0 or more"));
  s.draft_tokens = o.draft_tokens, s.draft_by_cost = o.draft_by_cost;
  s.draft_corpus_tokens = kDraftCorpusTokens;
  const int64_t sliding = sliding_blocks_needed(s);
  if (sliding > kMaxPoolBlocks)
    throw InputError(cat("--batch ", o.step_tokens, " with --parallel ", o.max_sequences,
                         ": the sliding-window layers would need ", sliding, " KV blocks, more than a KV pool holds (",
                         kMaxPoolBlocks, "); lower --batch or --parallel"));
  s.sliding_blocks = static_cast<int>(sliding);
  if (o.kv_bytes > 0) {
    const uint64_t sliding =
        KvPool::block_bytes(c, shard, o.kv_type, BlockKind::sliding) * static_cast<uint64_t>(s.sliding_blocks);
    const uint64_t full = std::max<uint64_t>(1, KvPool::block_bytes(c, shard, o.kv_type, BlockKind::full));
    if (o.kv_bytes <= sliding)
      throw InputError(cat("--kv-size ", o.kv_bytes, " bytes: the sliding-window layers alone need ", sliding, " for ",
                           o.max_sequences, " sequences"));
    s.full_blocks = static_cast<int>(std::min<uint64_t>((o.kv_bytes - sliding) / full, kMaxPoolBlocks));
  } else {
    const int64_t positions = o.kv_positions > 0 ? o.kv_positions : int64_t{o.context} * o.max_sequences;
    if (positions > (1 << 30))
      throw InputError(cat("--ctx ", o.context, " x --parallel ", o.max_sequences, " = ", positions,
                           " positions: more than a KV pool holds (2^30; use --kv-size)"));
    s.full_blocks = blocks_for(static_cast<int>(positions));
  }
  return s;
}

uint64_t kv_pool_bytes(const SchedulerOptions& s, KvType type, const ModelConfig& c, const Shard& shard) {
  return KvPool::block_bytes(c, shard, type, BlockKind::full) * s.full_blocks +
         KvPool::block_bytes(c, shard, type, BlockKind::sliding) * s.sliding_blocks;
}

uint64_t logit_rows(const GeneratorOptions& o) {
  return std::min<uint64_t>(o.step_tokens, uint64_t(o.max_sequences) * (1 + std::max(o.draft_tokens, 0)));
}

ForwardOptions forward_options(const GeneratorOptions& o) {
  return ForwardOptions{
      .step_tokens = o.step_tokens, .context = o.context, .yarn_truncate = o.yarn_truncate, .kernels = o.kernels};
}

uint64_t generator_bytes(const GeneratorOptions& o, const ModelConfig& c, const Shard& shard) {
  const uint64_t logits = logit_rows(o) * shard.share.vocab.size() * sizeof(float);
  const uint64_t tier = o.prefix_reuse ? o.cache_ram_bytes : 0;  // at its cap
  return kv_pool_bytes(scheduler_options(o, c, shard), o.kv_type, c, shard) +
         ForwardPass::buffer_bytes(c, shard, forward_options(o)) + logits + tier;
}

PromptCacheOptions prompt_cache_options(const GeneratorOptions& o, const SchedulerOptions& s) {
  return PromptCacheOptions{.kv_type = o.kv_type,
                            .full_blocks = s.full_blocks,
                            .sliding_blocks = s.sliding_blocks,
                            .ram_bytes = o.prefix_reuse ? o.cache_ram_bytes : 0,
                            .dir = o.cache_dir};
}

}  // namespace tps
