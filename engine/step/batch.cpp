#include "engine/step/batch.h"

namespace tps {

void Batch::add(int32_t seq, int32_t pos, std::span<const int32_t> t, int32_t logits, std::span<const int32_t> full,
                std::span<const int32_t> sliding, int32_t sliding_block0) {
  BatchEntry e;
  e.seq = seq, e.pos = pos, e.logits = logits;
  e.first = static_cast<int32_t>(tokens.size()), e.count = static_cast<int32_t>(t.size());
  tokens.insert(tokens.end(), t.begin(), t.end());
  e.full_at = static_cast<int32_t>(blocks.size()), e.full_count = static_cast<int32_t>(full.size());
  blocks.insert(blocks.end(), full.begin(), full.end());
  e.sliding_at = static_cast<int32_t>(blocks.size()), e.sliding_count = static_cast<int32_t>(sliding.size());
  e.sliding_block0 = sliding_block0;
  blocks.insert(blocks.end(), sliding.begin(), sliding.end());
  entries.push_back(e);
}

}  // namespace tps
