#include "engine/step/kv_pool.h"

#include <algorithm>

namespace tps {

namespace {
int64_t page_floats(const ModelConfig& c, const Shard& s) {
  return 2 * int64_t{kKvBlock} * s.share.kv_heads.size() * c.head_dim;
}
int layers_of_kind(const ModelConfig& c, const Shard& s, bool sliding) {
  int n = 0;
  for (int64_t l = s.share.layers.begin; l < s.share.layers.end; ++l) n += c.is_sliding_layer(l) == sliding;
  return n;
}
}  // namespace

uint64_t KvPool::block_bytes(const ModelConfig& c, const Shard& s, bool sliding) {
  return sizeof(float) * page_floats(c, s) * layers_of_kind(c, s, sliding);
}

KvPool::KvPool(const ModelConfig& c, const Shard& s, int full_blocks, int sliding_blocks)
    : kv_heads_(static_cast<int>(s.share.kv_heads.size())),
      hd_(static_cast<int>(c.head_dim)),
      full_blocks_(full_blocks),
      sliding_blocks_(sliding_blocks),
      page_floats_(page_floats(c, s)),
      place_(c.n_layer),
      memory_(block_bytes(c, s, false) * full_blocks + block_bytes(c, s, true) * sliding_blocks) {
  int64_t pages = 0;
  for (int64_t l = s.share.layers.begin; l < s.share.layers.end; ++l) {
    place_[l].first_page = pages;
    pages += c.is_sliding_layer(l) ? sliding_blocks : full_blocks;
  }
}

void KvPool::store(int layer, int block, int lane, const float* k, const float* v) {
  float* keys = page(layer, block);
  for (int g = 0; g < kv_heads_; ++g) {
    float* kb = keys + static_cast<int64_t>(g) * hd_ * kKvBlock + lane;
    for (int i = 0; i < hd_; ++i) kb[i * kKvBlock] = k[g * hd_ + i];
  }
  const int64_t width = static_cast<int64_t>(kv_heads_) * hd_;
  std::copy_n(v, width, keys + width * kKvBlock + lane * width);
}

void KvPool::attend(const KernelSet& k, int layer, std::span<const int32_t> table, int block0, const float* q,
                    int heads, int g, int first, int last, float scale, const float* sinks, float* scores,
                    float* out) const {
  const int count = last - first + 1;
  const int64_t width = static_cast<int64_t>(kv_heads_) * hd_;
  auto block_page = [&](int pos) { return page(layer, table[pos / kKvBlock - block0]); };
  // Scores a key block at a time, of which the visible positions take a
  // run; the block stays in L1 while every head scores it.
  for (int s = first; s <= last;) {
    const int lane = s % kKvBlock, take = std::min(kKvBlock - lane, last - s + 1);
    const float* kb = block_page(s) + static_cast<int64_t>(g) * hd_ * kKvBlock;
    k.score_keys(q, heads, hd_, kb, scale, lane, take, scores + s - first, count);
    s += take;
  }
  for (int h = 0; h < heads; ++h) k.softmax_sink(scores + h * count, count, sinks[h]);
  // The weighted sums of values by passes of kKvBlock positions from
  // `first`: each pass's values stay in L1 for every head (passes of 64 were
  // no faster), and a head's sums carry over between passes in out, so they
  // still add the positions in order.
  std::fill_n(out, static_cast<int64_t>(heads) * hd_, 0.0f);
  for (int s0 = 0; s0 < count; s0 += kKvBlock) {
    const int n = std::min(count - s0, kKvBlock);
    const float* values[kKvBlock];
    for (int s = s0; s < s0 + n; ++s) {
      const int pos = first + s;
      values[s - s0] = block_page(pos) + width * kKvBlock + (pos % kKvBlock) * width + g * hd_;
    }
    k.add_values(scores + s0, count, heads, values, n, hd_, out);
  }
}

}  // namespace tps
