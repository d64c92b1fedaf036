// Rank 0's bookkeeping of the KV pool's blocks (engine/cache/kv_pool.h): which
// are free, how many sequences hold each (a prefix shared by several is held
// by each), the prefix cache, and what has been promised. Ids only: the
// memory is every rank's KvPool, and the ids travel with each step.
//
// Prefix cache: a block whose kKvBlock positions are all computed is keyed by
// its token prefix (the chain of its and every earlier block's tokens,
// engine/cache/prefix_key.h), so a later sequence with the same prefix holds
// the same block instead of computing it again. A cached block nobody holds
// stays until the pool needs a block; then the least recently released goes
// first -- but blocks marked kept (keep(): the sliding-window blocks a reuse
// up to a message boundary needs) only after every other one, and at most
// a set number of them, the oldest marked leaving the mark first.
//
// Promises: a sequence is admitted only when the blocks it may need can be
// promised to it (counting cached blocks nobody holds as available), so a
// running sequence never finds the pool empty.
//
// Two kinds of blocks (full-attention and sliding-window layers), numbered
// apart, handled alike.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/cache/kv_block.h"

namespace tps {

class BlockManager {
 public:
  // max_kept: of each kind, how many blocks the kept mark may hold at once.
  BlockManager(int full_blocks, int sliding_blocks, int max_kept_full = 0, int max_kept_sliding = 0);

  int total(BlockKind k) const { return static_cast<int>(refs_[int(k)].size()); }
  // Blocks a new holder could get: free ones and cached ones nobody holds.
  int available(BlockKind k) const;
  // Of those, not promised to anyone.
  int unpromised(BlockKind k) const { return available(k) - promised_[int(k)]; }
  // Blocks held, or cached and held by nobody.
  int held(BlockKind k) const { return total(k) - static_cast<int>(free_[int(k)].size()) - cached_idle(k); }
  int cached_idle(BlockKind k) const { return static_cast<int>(idle_[int(k)].size() + kept_idle_[int(k)].size()); }

  // Promises n blocks (false, and nothing promised, if fewer are unpromised).
  bool promise(BlockKind k, int n);
  void unpromise(BlockKind k, int n);

  // A block for a new holder, drawn from a promise: a free block, else the
  // least recently released cached one (leaving the cache). Throws Error if
  // there is none (a promise was not kept).
  int allocate(BlockKind k);
  // Whether the last allocate took a cached block, and then its key (the
  // prompt cache's RAM tier saves it before the block is written).
  bool last_evicted(uint64_t& key) const {
    key = evicted_key_;
    return evicted_;
  }
  // One more holder of a block (a cached one leaves the idle list).
  void hold(BlockKind k, int id);
  // One holder less; a block nobody holds becomes idle if cached, else free.
  void release(BlockKind k, int id);

  // The cached block of a prefix key, or -1.
  int find(BlockKind k, uint64_t key) const;
  // The key and id of every cached block (held or not), in no particular order.
  std::vector<std::pair<uint64_t, int>> cached(BlockKind k) const {
    return {by_key_[int(k)].begin(), by_key_[int(k)].end()};
  }
  // Caches a held, fully computed block under its prefix key (nothing if the
  // key has a block already, or the block a key).
  void cache(BlockKind k, int id, uint64_t key);
  // Marks a cached block kept (see above); past max_kept, the oldest mark
  // goes. Nothing for a block not cached.
  void keep(BlockKind k, int id);
  bool kept(BlockKind k, int id) const { return kept_[int(k)][id] != 0; }

 private:
  std::vector<int> refs_[2];                          // holders per block
  std::vector<int> free_[2];                          // uncached blocks nobody holds; the lowest id last
  std::list<int> idle_[2];                            // cached blocks nobody holds, least recently released first
  std::list<int> kept_idle_[2];                       // the same, of those kept
  std::vector<std::list<int>::iterator> idle_at_[2];  // in idle_ or kept_idle_, where idle_in_ says
  std::vector<char> idle_in_[2];                      // 0: neither, 1: idle_, 2: kept_idle_
  std::vector<char> kept_[2];
  std::vector<uint32_t> kept_stamp_[2];                // the mark's: marks by age in kept_order_
  std::list<std::pair<int, uint32_t>> kept_order_[2];  // (id, stamp), oldest mark first; stale ones skipped
  int kept_count_[2] = {0, 0}, max_kept_[2] = {0, 0};
  std::vector<uint64_t> key_[2];  // a cached block's key
  std::vector<char> keyed_[2];
  std::unordered_map<uint64_t, int> by_key_[2];
  int promised_[2] = {0, 0};
  bool evicted_ = false;
  uint64_t evicted_key_ = 0;
};

}  // namespace tps
