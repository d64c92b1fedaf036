// The keys and values of every sequence a rank runs, in blocks of kKvBlock
// positions (engine/step/batch.h), and the attention of query heads over
// them (spec §2.3): scores q.k / sqrt(head_dim) over the visible positions,
// a softmax with the head's sink, the weighted sum of values.
//
// One pool per kind of layer: the full-attention layers' and the
// sliding-window layers' blocks are numbered apart, and a block id names the
// same positions in every layer of its kind (a sequence has one block table
// per kind). A sliding layer needs only the last window of positions, so a
// sequence gives its older sliding blocks back while its full ones grow.
//
// A block of one layer is a page: the key blocks of each kv head (one lane
// per position, so the scores of a block come out together in registers),
// then the value rows [kKvBlock][kv head], in the pool's KvType
// (kernels/kv_format.h). Keys and values are stored converted; attention
// reads them as the kernels widen them to f32. The pool is the
// rank's own memory (its NUMA node, as the rank's memory policy places it),
// and holds only the shard's layers and KV heads. The arithmetic is the
// kernels' (kernels/kernel_set.h): with the scalar set, the bits of the
// obvious loops.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/step/batch.h"
#include "runtime/page_buffer.h"

namespace tps {

static_assert(kKvBlock == kKeyBlock, "a KV block is one key block of the attention kernels");

// The first position a query at pos may attend to: pos - window + 1 on
// sliding layers (the query sees itself and window - 1 earlier tokens), 0 on
// full-attention layers.
inline int first_visible(int pos, int window, bool sliding) {
  return sliding && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

class KvPool {
 public:
  KvPool() = default;
  // Room for full_blocks blocks in each full-attention layer of the shard and
  // sliding_blocks in each sliding one (keys and values of the shard's KV
  // heads, stored as `type`).
  KvPool(const ModelConfig& config, const Shard& shard, KvType type, int full_blocks, int sliding_blocks);

  int blocks(bool sliding) const { return sliding ? sliding_blocks_ : full_blocks_; }
  KvType type() const { return type_; }
  // Bytes one block takes in all the shard's layers of its kind, and the pool's.
  static uint64_t block_bytes(const ModelConfig& config, const Shard& shard, KvType type, bool sliding);
  uint64_t bytes() const { return memory_.size(); }

  // Stores one position's keys and values, each [kv heads][head_dim], at
  // lane `lane` of block `block` of layer `layer` (global index). Elements
  // beyond what the type keeps are stored as its limit (kv_format.h), and
  // the first time a pool does so it says so on stderr.
  void store(int layer, int block, int lane, const float* k, const float* v);

  // out[h][head_dim] = the attention of query heads h in [0, heads) (q
  // [heads][head_dim], sinks [heads]), which share kv head g, over positions
  // [first, last] of layer `layer`, whose blocks are table[b - block0] for
  // block numbers b. scores: room for heads x (last - first + 1) floats.
  // The heads go together so that each key and value block is read from
  // memory once for all of them; each head's result is the bits of
  // attending alone.
  void attend(const KernelSet& k, int layer, std::span<const int32_t> table, int block0, const float* q, int heads,
              int g, int first, int last, float scale, const float* sinks, float* scores, float* out) const;

 private:
  uint8_t* page(int layer, int block) const {
    return memory_.data() + (place_[layer].first_page + static_cast<int64_t>(block)) * page_bytes_;
  }

  struct Place {
    int64_t first_page = -1;  // of the layer's pages in memory_; -1: not the shard's
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
