#include "engine/kv_cache.h"

#include <algorithm>
#include <span>

#include "engine/layer_math.h"

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

namespace {
// Four floats as one value (an SSE register, which every x86-64 has): the
// blocks below are written in these so that their sums stay in registers.
// Lanes are independent, so every lane rounds as the plain loop does.
using f4 = float __attribute__((vector_size(16)));
using f4_unaligned = float __attribute__((vector_size(16), aligned(4)));
inline f4 load4(const float* p) { return *reinterpret_cast<const f4_unaligned*>(p); }
inline void store4(float* p, f4 v) { *reinterpret_cast<f4_unaligned*>(p) = v; }
}  // namespace

void LayerCache::attend(const float* q, int heads, int g, int first, int last, float scale,
                        const float* sinks, float* scores, float* out) const {
  static_assert(kKeyBlock == 16 && kValueBlock == 32, "the blocks below are 4 and 8 registers");
  const int count = last - first + 1;
  // Scores a key block at a time, of which the visible positions take a run
  // (a ring may wrap between two runs); the block stays in L1 while every
  // head scores it.
  for (int s = first; s <= last;) {
    const int slot = s % slots_, lane = slot % kKeyBlock;
    const int take = std::min(kKeyBlock - lane, last - s + 1);
    for (int h = 0; h < heads; ++h) {
      const float* qh = q + h * hd_;
      const float* kb = k_.data() + key_block(g, slot);
      f4 sum[4] = {};
      for (int i = 0; i < hd_; ++i, kb += kKeyBlock)
        for (int r = 0; r < 4; ++r) sum[r] += qh[i] * load4(kb + 4 * r);
      float block[kKeyBlock];
      for (int r = 0; r < 4; ++r) store4(block + 4 * r, sum[r]);
      for (int j = 0; j < take; ++j) scores[h * count + s - first + j] = block[lane + j] * scale;
    }
    s += take;
  }
  for (int h = 0; h < heads; ++h)
    softmax_with_sink(std::span<float>(scores + h * count, static_cast<size_t>(count)), sinks[h]);
  // The weighted sums of values, kValueBlock dimensions at a time, over the
  // positions' slots in one run or two (where the ring wraps). The
  // positions go by passes of kKeyBlock, each pass's values in L1 for every
  // head (passes of 64 were no faster); a head's sums carry over between
  // passes in out, so every lane still adds the positions in order.
  const int64_t width = static_cast<int64_t>(kv_heads_) * hd_;
  const int start = first % slots_, run = std::min(count, slots_ - start);
  auto value = [&](int s) {  // of position first + s
    return v_.data() + (s < run ? start + s : s - run) * width + g * hd_;
  };
  for (int s0 = 0; s0 < count; s0 += kKeyBlock) {
    const int s1 = std::min(count, s0 + kKeyBlock);
    for (int h = 0; h < heads; ++h) {
      const float* p = scores + h * count;
      float* o = out + h * hd_;
      for (int i0 = 0; i0 < hd_; i0 += kValueBlock) {
        if (hd_ - i0 >= kValueBlock) {
          f4 sum[8] = {};
          if (s0 > 0)
            for (int r = 0; r < 8; ++r) sum[r] = load4(o + i0 + 4 * r);
          for (int s = s0; s < s1; ++s) {
            const float* vs = value(s) + i0;
            for (int r = 0; r < 8; ++r) sum[r] += p[s] * load4(vs + 4 * r);
          }
          for (int r = 0; r < 8; ++r) store4(o + i0 + 4 * r, sum[r]);
          continue;
        }
        for (int i = i0; i < hd_; ++i) {  // a head size that is not a whole number of blocks
          float acc = s0 > 0 ? o[i] : 0.0f;
          for (int s = s0; s < s1; ++s) acc += p[s] * value(s)[i];
          o[i] = acc;
        }
      }
    }
  }
}

}  // namespace tps
