// A rank's KV memory and prompt cache, the one front the generation loop
// talks to: the pool every step reads and writes (kv_pool.h), the RAM tier
// that keeps the blocks the pool lets go (ram_tier.h), and their files
// (disk_tier.h, --cache-dir). Rank 0's scheduler decides which block ids
// and slots hold what (block_manager.h, tier_index.h) and sends each step's
// copies with the step; every rank applies them alike, so the slots mean
// the same keys on every rank.
//
// The RAM tier is sized in units of kTierFullPerSliding full blocks and one
// sliding block (a cached prefix keeps all its full blocks but only its last
// window's sliding ones), as many as the least of every rank's byte cap
// holds, so every rank has the same slots.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/cache/disk_tier.h"
#include "engine/cache/kv_block.h"
#include "engine/cache/kv_pool.h"
#include "engine/cache/ram_tier.h"
#include "engine/model/model.h"
#include "runtime/clock.h"
#include "runtime/exchange.h"

namespace tps {

constexpr int kTierFullPerSliding = 8;
// A RAM tier unit's bytes on a rank with this shard, and the units within
// cap_bytes (0: no RAM tier).
uint64_t tier_unit_bytes(KvType type, const ModelConfig& config, const Shard& shard);
int tier_units(uint64_t cap_bytes, KvType type, const ModelConfig& config, const Shard& shard);

struct PromptCacheOptions {
  KvType kv_type = kDefaultKvType;
  int full_blocks = 0, sliding_blocks = 0;  // the pool's
  uint64_t ram_bytes = 0;                   // the RAM tier's cap on this rank (0: none)
  std::string dir;                          // the disk tier's directory ("": none), within ram_bytes
};

class PromptCache {
 public:
  // Collective: every rank with the same options (but its own cap). With a
  // directory and a RAM tier, validates the rank's files (disk_tier.h).
  PromptCache(const Model& model, Exchange& exchange, const PromptCacheOptions& options);

  KvPool& kv() { return kv_; }
  const KvPool& kv() const { return kv_; }
  const RamTier& tier() const { return tier_; }
  const DiskTier& disk() const { return *disk_; }

  // A block loaded into a RAM tier slot at start, as rank 0's scheduler
  // adopts it (TierIndex::adopt).
  struct Loaded {
    BlockKind kind;
    int slot;
    uint64_t key;
  };
  // Collective, before the first step: rank 0's saved blocks, most recently
  // used first, that every rank has a valid file of and that fit the slots
  // are read into the same slots on every rank; those read on every rank,
  // oldest first (a block some rank lacks stays out, its slot free).
  std::vector<Loaded> load();

  // A step's copies between the pool and the RAM tier, in order, before it
  // runs; blocks entering the RAM tier are written behind to the disk tier
  // (its writer thread), and those coming back are its most recently used.
  void copy(std::span<const BlockCopy> copies);

  // Whether save() writes anything: a disk tier was asked for (on every
  // rank alike, though a rank's may have turned off).
  bool saves() const { return disk_asked_; }
  // Collective, at the end of a run: rank 0's pool blocks (copies to the
  // tier, slots unused) are written to the disk tier too, so that a prefix
  // the pool never had to let go of survives a restart as well; returns when
  // every write is on disk.
  void save(std::vector<BlockCopy> blocks);

 private:
  Exchange& exchange_;
  Clock::time_point started_;  // before the disk tier's files were checked
  KvPool kv_;
  RamTier tier_;
  std::unique_ptr<DiskTier> disk_;
  bool disk_asked_ = false;
};

}  // namespace tps
