// The KV cache's unit: a block of kKvBlock consecutive positions of one
// sequence, of one of two kinds (the full-attention layers' and the
// sliding-window layers', numbered apart), and a block's copy between the
// pool and the RAM tier as a step carries it to every rank.
#pragma once

#include <cstdint>

namespace tps {

// Positions per KV block: the unit of the pool, of the block tables and of
// prefix reuse (the key block of the attention kernels).
constexpr int kKvBlock = 16;
// (In 64 bits: positions + 15 overflowed int for a --batch near 2^31.)
inline int blocks_for(int positions) { return static_cast<int>((int64_t{positions} + kKvBlock - 1) / kKvBlock); }

// Which layers' pool a block is of. The one spelling of a block's kind: in
// the pool, the tiers, the bookkeeping, the step's copies and (as its
// number) a disk tier file's header.
enum class BlockKind : int32_t { full = 0, sliding = 1 };
constexpr BlockKind kBlockKinds[] = {BlockKind::full, BlockKind::sliding};
inline const char* block_kind_name(BlockKind k) { return k == BlockKind::sliding ? "sliding" : "full"; }
inline BlockKind kind_of_layer(bool sliding) { return sliding ? BlockKind::sliding : BlockKind::full; }

// A block's pages copied between the KV pool and the rank's RAM tier of the
// prompt cache (engine/cache/ram_tier.h) before a step runs: every rank does
// the step's copies, in order, on its own share, so the tiers of all ranks
// hold the same keys in the same slots.
struct BlockCopy {
  BlockKind kind = BlockKind::full;
  int32_t block = 0;    // its id in the pool
  int32_t slot = 0;     // its slot in the tier
  int32_t to_tier = 0;  // 1: pool -> tier (the block is about to be reused); 0: tier -> pool
  uint64_t key = 0;     // its prefix key (what names its file in the disk tier, engine/cache/disk_tier.h)
};

}  // namespace tps
