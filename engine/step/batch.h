// One forward step's work: runs of consecutive positions of several
// sequences -- the next token of every decoding sequence and chunks of
// prompts -- with, for each, where its keys and values live in the rank's
// KV pool (engine/step/kv_pool.h). Plain arrays, so that rank 0 can send a
// step to the other ranks as it is.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tps {

// Positions per KV block: the unit of the pool, of the block tables and of
// prefix reuse (the key block of the attention kernels).
constexpr int kKvBlock = 16;
// (In 64 bits: positions + 15 overflowed int for a --batch near 2^31.)
inline int blocks_for(int positions) { return static_cast<int>((int64_t{positions} + kKvBlock - 1) / kKvBlock); }

struct BatchEntry {
  int32_t seq = 0;               // the caller's sequence number
  int32_t pos = 0;               // position of the entry's first token
  int32_t first = 0, count = 0;  // its tokens: Batch::tokens[first, first + count)
  int32_t logits = 0;            // logit rows wanted: 0, 1 (of its last token) or count (of each)
  // Its block tables, in Batch::blocks: for the full-attention layers, the
  // blocks of block numbers [0, full_count) (block number b holds positions
  // [16b, 16b + 16)); for the sliding-window layers, those of block numbers
  // [sliding_block0, sliding_block0 + sliding_count), which cover what the
  // entry's tokens see.
  int32_t full_at = 0, full_count = 0;
  int32_t sliding_at = 0, sliding_count = 0, sliding_block0 = 0;
};

// A block's pages copied between the KV pool and the rank's RAM tier of the
// prompt cache (engine/step/ram_tier.h) before a step runs: every rank does
// the step's copies, in order, on its own share, so the tiers of all ranks
// hold the same keys in the same slots.
struct BlockCopy {
  int32_t sliding = 0;  // the block's kind: 0 full-attention, 1 sliding-window
  int32_t block = 0;    // its id in the pool
  int32_t slot = 0;     // its slot in the tier
  int32_t to_tier = 0;  // 1: pool -> tier (the block is about to be reused); 0: tier -> pool
  uint64_t key = 0;     // its prefix key (what names its file in the disk tier, engine/step/disk_tier.h)
};

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<BatchEntry> entries;
  std::vector<int32_t> blocks;
  std::vector<BlockCopy> copies;  // done before the step, in order

  void clear() { tokens.clear(), entries.clear(), blocks.clear(), copies.clear(); }
  int token_count() const { return static_cast<int>(tokens.size()); }
  int logit_rows() const {
    int rows = 0;
    for (const BatchEntry& e : entries) rows += e.logits;
    return rows;
  }
  std::span<const int32_t> full_table(const BatchEntry& e) const {
    return {blocks.data() + e.full_at, size_t(e.full_count)};
  }
  std::span<const int32_t> sliding_table(const BatchEntry& e) const {
    return {blocks.data() + e.sliding_at, size_t(e.sliding_count)};
  }
  // Appends an entry of `tokens` at pos with the given tables.
  void add(int32_t seq, int32_t pos, std::span<const int32_t> tokens, int32_t logits, std::span<const int32_t> full,
           std::span<const int32_t> sliding, int32_t sliding_block0);
};

}  // namespace tps
