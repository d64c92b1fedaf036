#include "engine/step/kv_cache.h"

#include <algorithm>

namespace tps {

LayerCache::LayerCache(int slots, int kv_heads, int head_dim)
    : slots_((slots + kKeyBlock - 1) / kKeyBlock * kKeyBlock), kv_heads_(kv_heads), hd_(head_dim) {
  const size_t width = static_cast<size_t>(kv_heads) * head_dim;
  k_.resize(static_cast<size_t>(slots_) * width);
  v_.resize(static_cast<size_t>(slots_) * width);
}

void LayerCache::store(int pos, const float* k, const float* v) {
  const int slot = pos % slots_, lane = slot % kKeyBlock;
  for (int g = 0; g < kv_heads_; ++g) {
    float* kb = k_.data() + key_block(g, slot) + lane;
    for (int i = 0; i < hd_; ++i) kb[i * kKeyBlock] = k[g * hd_ + i];
  }
  const int64_t width = static_cast<int64_t>(kv_heads_) * hd_;
  std::copy_n(v, width, v_.data() + slot * width);
}

void LayerCache::attend(const KernelSet& k, const float* q, int heads, int g, int first, int last, float scale,
                        const float* sinks, float* scores, float* out) const {
  const int count = last - first + 1;
  // Scores a key block at a time, of which the visible positions take a run
  // (a ring may wrap between two runs); the block stays in L1 while every
  // head scores it.
  for (int s = first; s <= last;) {
    const int slot = s % slots_, lane = slot % kKeyBlock;
    const int take = std::min(kKeyBlock - lane, last - s + 1);
    k.score_keys(q, heads, hd_, k_.data() + key_block(g, slot), scale, lane, take, scores + s - first, count);
    s += take;
  }
  for (int h = 0; h < heads; ++h) k.softmax_sink(scores + h * count, count, sinks[h]);
  // The weighted sums of values over the positions' slots, in one run or
  // two (where the ring wraps), by passes of kKeyBlock positions: each
  // pass's values stay in L1 for every head (passes of 64 were no faster),
  // and a head's sums carry over between passes in out, so they still add
  // the positions in order.
  const int64_t width = static_cast<int64_t>(kv_heads_) * hd_;
  const int start = first % slots_, run = std::min(count, slots_ - start);
  std::fill_n(out, static_cast<int64_t>(heads) * hd_, 0.0f);
  for (int s0 = 0; s0 < count; s0 += kKeyBlock) {
    const int n = std::min(count - s0, kKeyBlock);
    const float* values[kKeyBlock];
    for (int s = s0; s < s0 + n; ++s)  // position first + s
      values[s - s0] = v_.data() + (s < run ? start + s : s - run) * width + g * hd_;
    k.add_values(scores + s0, count, heads, values, n, hd_, out);
  }
}

}  // namespace tps
