// The keys and values of every sequence a rank runs, in blocks of kKvBlock
// positions (engine/cache/kv_block.h), and the attention of query heads over
// them (spec §2.3): scores q.k / sqrt(head_dim) over the visible positions,
// a softmax with the head's sink, the weighted sum of values.
//
// One pool per kind of layer: the full-attention layers' and the
// sliding-window layers' blocks are numbered apart, and a block id names the
// same positions in every layer of its kind (a sequence has one block table
// per kind). A sliding layer needs only the last window of positions, so a
// sequence gives its older sliding blocks back while its full ones grow.
//
// A block of one layer is a page: for each kv head in turn its key block
// (one lane per position, so the scores of a block come out together in
// registers) and then its kKvBlock value rows, in the pool's KvType
// (kernels/kv_format.h), so what one head's attention reads of a block is
// one contiguous run the hardware prefetchers follow (value rows
// interleaved by kv head read 1.4x slower at 32k positions). Keys and
// values are stored converted; attention reads them as the kernels widen
// them to f32. The pool is the rank's own memory (its NUMA node, as the rank's memory policy places it),
// and holds only the shard's layers and KV heads. The arithmetic is the
// kernels' (kernels/kernel_set.h): with the scalar set, the bits of the
// obvious loops.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/cache/kv_block.h"
#include "engine/kernels/attention_state.h"
#include "engine/kernels/kernel_set.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "runtime/page_buffer.h"

namespace tps {

static_assert(kKvBlock == kKeyBlock, "a KV block is one key block of the attention kernels");

// The first position a query at pos may attend to: pos - window + 1 on
// sliding layers (the query sees itself and window - 1 earlier tokens), 0 on
// full-attention layers.
inline int first_visible(int pos, int window, bool sliding) {
  return sliding && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

// Attention cuts a query's visible positions into chunks at multiples of
// kAttentionChunk positions, whichever thread takes each (flash-decoding):
// a fixed size, never the thread count's, so that the chunks' states
// (kernels/attention_state.h) merge in chunk order to the same bits for
// every thread count and batch (the split invariant). 256: a long
// sequence's chunks keep every thread busy, and merging one costs 1/256 of
// its arithmetic.
constexpr int kAttentionChunk = 256;
static_assert(kAttentionChunk == kAttendRunBlocks * kKvBlock && kKvBlock == kKeyBlock, "a chunk is one kernel run");
// Chunks of positions [first, last], and chunk c's first and last.
inline int attention_chunks(int first, int last) { return last / kAttentionChunk - first / kAttentionChunk + 1; }
inline int chunk_first(int first, int c) {
  const int at = (first / kAttentionChunk + c) * kAttentionChunk;
  return at > first ? at : first;
}
inline int chunk_last(int first, int last, int c) {
  const int end = (first / kAttentionChunk + c + 1) * kAttentionChunk - 1;
  return end < last ? end : last;
}

class KvPool {
 public:
  KvPool() = default;
  // Room for full_blocks blocks in each full-attention layer of the shard and
  // sliding_blocks in each sliding one (keys and values of the shard's KV
  // heads, stored as `type`).
  KvPool(const ModelConfig& config, const Shard& shard, KvType type, int full_blocks, int sliding_blocks);

  int blocks(BlockKind k) const { return k == BlockKind::sliding ? sliding_blocks_ : full_blocks_; }
  KvType type() const { return type_; }
  // Bytes one block takes in all the shard's layers of its kind, and the pool's.
  static uint64_t block_bytes(const ModelConfig& config, const Shard& shard, KvType type, BlockKind kind);
  uint64_t bytes() const { return memory_.size(); }

  // Stores one position's keys and values, each [kv heads][head_dim], at
  // lane `lane` of block `block` of layer `layer` (global index). Elements
  // beyond what the type keeps are stored as its limit (kv_format.h), and
  // the first time a pool does so it says so on stderr.
  void store(int layer, int block, int lane, const float* k, const float* v);

  // One block's pages in all the shard's layers of its kind, packed in layer
  // order (block_bytes of them): out to the prompt cache's RAM tier before
  // the block is reused, and back in when a prefix returns.
  void copy_out(BlockKind kind, int block, uint8_t* to) const;
  void copy_in(BlockKind kind, int block, const uint8_t* from);

  // The attention state (kernels/attention_state.h) of query heads h in
  // [0, heads) (q [heads][head_dim]), which share kv head g, over positions
  // [first, last] of layer `layer`, whose blocks are table[b - block0] for
  // block numbers b: one pass over the keys and values, a key block at a
  // time for every head, so each is read from memory once for all of them.
  void attend_chunk(const KernelSet& k, int layer, std::span<const int32_t> table, int block0, const float* q,
                    int heads, int g, int first, int last, float scale, AttentionState state) const;
  // attend_chunk for each of `tokens` queries q[t] into states[t] (the same
  // bits), each key block and its values read and widened once for all of
  // them (KernelSet::attend_tile): a prefill tile's tokens that all see
  // [first, last] whole.
  void attend_tile_chunk(const KernelSet& k, int layer, std::span<const int32_t> table, int block0,
                         const float* const* q, int tokens, int heads, int g, int first, int last, float scale,
                         const AttentionState* states) const;
  // out[h][head_dim] = the attention of those heads (sinks [heads]) over
  // [first, last]: its chunks' states (kAttentionChunk) merged in order and
  // finished, the bits of any split of the chunks between threads. scratch:
  // room for 2 x attention_state_floats(heads, head_dim).
  void attend(const KernelSet& k, int layer, std::span<const int32_t> table, int block0, const float* q, int heads,
              int g, int first, int last, float scale, const float* sinks, float* scratch, float* out) const;

 private:
  // The run (KernelSet::attend_run) of kv head g's positions [first, last],
  // one chunk's: its key blocks into keys, its value rows into values;
  // returns the first position's lane.
  int run_of(int layer, std::span<const int32_t> table, int block0, int g, int first, int last, const uint8_t** keys,
             const uint8_t** values) const;
  uint8_t* page(int layer, int block) const {
    return memory_.data() + (place_[layer].first_page + static_cast<int64_t>(block)) * page_bytes_;
  }
  // Kv head g's key block in a page; its value rows follow it.
  uint8_t* head_keys(int layer, int block, int g) const {
    return page(layer, block) + g * (key_block_bytes_ + kKvBlock * value_bytes_);
  }
  // The value row of lane `lane` after a kv head's key block `keys`.
  uint8_t* value_row(uint8_t* keys, int lane) const { return keys + key_block_bytes_ + lane * value_bytes_; }

  struct Place {
    int64_t first_page = -1;  // of the layer's pages in memory_; -1: not the shard's
    BlockKind kind = BlockKind::full;
  };
  KvType type_ = KvType::f32;
  int kv_heads_ = 0, hd_ = 0, full_blocks_ = 0, sliding_blocks_ = 0;
  int64_t key_block_bytes_ = 0, value_bytes_ = 0;  // of one kv head
  int64_t page_bytes_ = 0;                         // keys and values of one block of one layer
  std::vector<Place> place_;                       // by global layer
  PageBuffer memory_;
  bool warned_ = false;  // of elements clamped to the type
};

}  // namespace tps
