// A rank's RAM tier of the prompt cache: KV blocks the pool let go, kept in
// host memory in numbered slots (the rank's share only: its layers and KV
// heads, in its own memory, as its memory policy places it). Rank 0's
// scheduler decides which key lives in which slot (engine/cache/tier_index.h)
// and sends each step's copies with the step (engine/cache/kv_block.h); every
// rank does them alike, so the slots mean the same keys on every rank.
//
// A slot is allocated the first time it is written and kept: the tier's
// bytes grow to full_slots x full_block_bytes + sliding_slots x
// sliding_block_bytes at most, which the caller sizes within --cache-ram.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/cache/kv_block.h"
#include "engine/cache/kv_pool.h"

namespace tps {

class RamTier {
 public:
  RamTier() = default;
  RamTier(uint64_t full_block_bytes, uint64_t sliding_block_bytes, int full_slots, int sliding_slots);

  // The step's copies, in order, between the pool and the slots.
  void apply(std::span<const BlockCopy> copies, KvPool& kv);
  // A slot's bytes, allocated at the first call (to be written: a block
  // loaded from the disk tier at start), or null when never written.
  uint8_t* fill(BlockKind k, int slot);
  const uint8_t* data(BlockKind k, int slot) const { return slots_[int(k)].at(slot).get(); }
  uint64_t block_bytes(BlockKind k) const { return block_bytes_[int(k)]; }
  int slots(BlockKind k) const { return static_cast<int>(slots_[int(k)].size()); }
  // Bytes allocated so far, and at most (every slot written).
  uint64_t bytes() const { return bytes_; }
  uint64_t capacity() const { return block_bytes_[0] * slots_[0].size() + block_bytes_[1] * slots_[1].size(); }

 private:
  uint64_t block_bytes_[2] = {0, 0};
  std::vector<std::unique_ptr<uint8_t[]>> slots_[2];
  uint64_t bytes_ = 0;
};

}  // namespace tps
