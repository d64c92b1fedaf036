// Rank 0's index of the prompt cache's RAM tier (engine/cache/ram_tier.h):
// which prefix key (engine/cache/prefix_key.h) each slot holds, per kind of
// block, least recently used first. When the pool is about to reuse a
// cached block, its key gets a slot (the least recently used one's key
// leaves the tier); when a prefix lookup misses the pool but finds its key
// here, the block comes back from the slot, which keeps it too. A slot that
// a pending copy will read is pinned: no save takes it first.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/cache/block_manager.h"

namespace tps {

class TierIndex {
 public:
  TierIndex() = default;
  TierIndex(int full_slots, int sliding_slots);

  int slots(BlockKind k) const { return static_cast<int>(key_[int(k)].size()); }
  int used(BlockKind k) const { return static_cast<int>(by_key_[int(k)].size()); }
  // The slot that holds a key, or -1.
  int find(BlockKind k, uint64_t key) const;
  // Marks a slot most recently used.
  void touch(BlockKind k, int slot);
  // The slot a block of this key is to be saved to, or -1 when there is
  // nothing to save (the key is here already: touched) or no slot to take
  // (none, or all pinned). Counts the key it displaces as an eviction.
  int place(BlockKind k, uint64_t key);
  // Gives a free slot a key, most recently used (a block the disk tier
  // loaded into it at start); false when the slot is not free.
  bool adopt(BlockKind k, int slot, uint64_t key);
  void pin(BlockKind k, int slot) { pinned_[int(k)].push_back(slot); }
  void unpin_all() { pinned_[0].clear(), pinned_[1].clear(); }
  int64_t evictions() const { return evictions_; }

 private:
  bool pinned(int k, int slot) const;

  std::vector<uint64_t> key_[2];  // by slot
  std::vector<std::list<int>::iterator> at_[2];
  std::list<int> lru_[2];  // slots in use, least recently used first
  std::vector<int> free_[2];
  std::unordered_map<uint64_t, int> by_key_[2];
  std::vector<int> pinned_[2];
  int64_t evictions_ = 0;
};

}  // namespace tps
