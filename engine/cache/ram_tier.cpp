#include "engine/cache/ram_tier.h"

#include "runtime/error.h"

namespace tps {

RamTier::RamTier(uint64_t full_block_bytes, uint64_t sliding_block_bytes, int full_slots, int sliding_slots)
    : block_bytes_{full_block_bytes, sliding_block_bytes} {
  slots_[0].resize(full_slots), slots_[1].resize(sliding_slots);
}

uint8_t* RamTier::fill(BlockKind k, int slot) {
  std::unique_ptr<uint8_t[]>& s = slots_[int(k)].at(slot);
  if (!s) {
    // Not value-initialized: the copy is the first write, so only the
    // pages of slots in use are ever touched.
    s.reset(new uint8_t[block_bytes_[int(k)]]);
    bytes_ += block_bytes_[int(k)];
  }
  return s.get();
}

void RamTier::apply(std::span<const BlockCopy> copies, KvPool& kv) {
  for (const BlockCopy& c : copies) {
    std::vector<std::unique_ptr<uint8_t[]>>& slots = slots_[int(c.kind)];
    if (c.slot < 0 || static_cast<size_t>(c.slot) >= slots.size())
      throw Error(cat("a step's cache copy names slot ", c.slot, " of ", slots.size()));
    std::unique_ptr<uint8_t[]>& slot = slots[c.slot];
    if (c.to_tier) {
      kv.copy_out(c.kind, c.block, fill(c.kind, c.slot));
    } else {
      if (!slot) throw Error(cat("a step's cache copy reads slot ", c.slot, ", which was never written"));
      kv.copy_in(c.kind, c.block, slot.get());
    }
  }
}

}  // namespace tps
