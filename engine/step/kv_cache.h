// One layer's KV cache and the attention of query heads over it (spec
// §2.3): scores q.k / sqrt(head_dim) over the visible positions, a softmax
// with the head's sink, the weighted sum of values.
//
// A position's keys and values go to slot = position % slots, so a sliding
// layer keeps a ring of the last positions only. Values are [slots][kv
// width]. Keys are [kv head][slots / kKeyBlock][head_dim][kKeyBlock]: the
// scores of a block of positions are computed at once, in registers, and
// storing a key touches a few cache lines and pages, not one per dimension.
// The arithmetic is the kernels' (kernels/kernel_set.h, which sets kKeyBlock): with
// the scalar set, the bits of the obvious loops.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/kernel_set.h"

namespace tps {

// The first position a query at pos may attend to: pos - window + 1 on
// sliding layers (the query sees itself and window - 1 earlier tokens), 0 on
// full-attention layers.
inline int first_visible(int pos, int window, bool sliding) {
  return sliding && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

class LayerCache {
 public:
  LayerCache() = default;
  // At least `slots` positions (rounded up to whole key blocks).
  LayerCache(int slots, int kv_heads, int head_dim);

  int slots() const { return slots_; }

  // Stores position pos's keys and values, each [kv_heads][head_dim].
  void store(int pos, const float* k, const float* v);

  // out[h][head_dim] = the attention of query heads h in [0, heads) (q
  // [heads][head_dim], sinks [heads]), which share kv head g, over
  // positions [first, last], which must still be in the cache, with the
  // kernels k. scores: room for heads x (last - first + 1) floats. The heads
  // go together so that each key and value block is read from memory once
  // for all of them, not once per head; each head's result is the bits of
  // attending alone.
  void attend(const KernelSet& k, const float* q, int heads, int g, int first, int last, float scale,
              const float* sinks, float* scores, float* out) const;

 private:
  // Where kv head g's key block holding slot starts in k_.
  int64_t key_block(int g, int slot) const {
    return (static_cast<int64_t>(g) * (slots_ / kKeyBlock) + slot / kKeyBlock) * hd_ * kKeyBlock;
  }

  int slots_ = 0, kv_heads_ = 0, hd_ = 0;
  std::vector<float> k_, v_;
};

}  // namespace tps
