// One forward step's work: runs of consecutive positions of several
// sequences -- the next token of every decoding sequence and chunks of
// prompts -- with, for each, where its keys and values live in the rank's
// KV pool (engine/cache/kv_pool.h). Plain arrays, so that rank 0 can send a
// step to the other ranks as it is.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/cache/kv_block.h"

namespace tps {

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
