#include "engine/step/kv_pool.h"

#include <algorithm>

#include "runtime/log.h"

namespace tps {

namespace {
int64_t page_bytes(const ModelConfig& c, const Shard& s, KvType type) {
  const int hd = static_cast<int>(c.head_dim);
  return static_cast<int64_t>(s.share.kv_heads.size()) *
         (kv_key_block_bytes(type, hd) + int64_t{kKvBlock} * kv_value_bytes(type, hd));
}
int layers_of_kind(const ModelConfig& c, const Shard& s, bool sliding) {
  int n = 0;
  for (int64_t l = s.share.layers.begin; l < s.share.layers.end; ++l) n += c.is_sliding_layer(l) == sliding;
  return n;
}
}  // namespace

uint64_t KvPool::block_bytes(const ModelConfig& c, const Shard& s, KvType type, bool sliding) {
  return page_bytes(c, s, type) * layers_of_kind(c, s, sliding);
}

KvPool::KvPool(const ModelConfig& c, const Shard& s, KvType type, int full_blocks, int sliding_blocks)
    : type_(type),
      kv_heads_(static_cast<int>(s.share.kv_heads.size())),
      hd_(static_cast<int>(c.head_dim)),
      full_blocks_(full_blocks),
      sliding_blocks_(sliding_blocks),
      key_block_bytes_(kv_key_block_bytes(type, hd_)),
      value_bytes_(kv_value_bytes(type, hd_)),
      page_bytes_(page_bytes(c, s, type)),
      place_(c.n_layer),
      memory_(block_bytes(c, s, type, false) * full_blocks + block_bytes(c, s, type, true) * sliding_blocks) {
  int64_t pages = 0;
  for (int64_t l = s.share.layers.begin; l < s.share.layers.end; ++l) {
    place_[l].first_page = pages;
    pages += c.is_sliding_layer(l) ? sliding_blocks : full_blocks;
  }
}

void KvPool::store(int layer, int block, int lane, const float* k, const float* v) {
  uint8_t* keys = page(layer, block);
  uint8_t* values = keys + kv_heads_ * key_block_bytes_ + int64_t{lane} * kv_heads_ * value_bytes_;
  int clamped = 0;
  for (int g = 0; g < kv_heads_; ++g) {
    clamped += store_keys(type_, keys + g * key_block_bytes_, hd_, lane, k + g * hd_);
    clamped += store_values(type_, values + g * value_bytes_, hd_, v + g * hd_);
  }
  if (clamped > 0 && !warned_) {  // once: a model that overflows the type does it at every token
    warned_ = true;
    log_warn("KV cache ", kv_type_name(type_), ": ", clamped, " key or value element(s) of layer ", layer,
             " beyond what it keeps (+-", kv_type_limit(type_),
             ") stored as that, not as inf; --kv-type f32 keeps them (said once)");
  }
}

void KvPool::attend(const KernelSet& k, int layer, std::span<const int32_t> table, int block0, const float* q,
                    int heads, int g, int first, int last, float scale, const float* sinks, float* scores,
                    float* out) const {
  const int count = last - first + 1;
  const KernelSet::ScoreKeys score_keys = k.score_keys[static_cast<int>(type_)];
  const KernelSet::AddValues add_values = k.add_values[static_cast<int>(type_)];
  auto block_page = [&](int pos) { return page(layer, table[pos / kKvBlock - block0]); };
  // Scores a key block at a time, of which the visible positions take a
  // run; the block stays in L1 while every head scores it.
  for (int s = first; s <= last;) {
    const int lane = s % kKvBlock, take = std::min(kKvBlock - lane, last - s + 1);
    score_keys(q, heads, hd_, block_page(s) + g * key_block_bytes_, scale, lane, take, scores + s - first, count);
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
    const uint8_t* values[kKvBlock];
    for (int s = s0; s < s0 + n; ++s) {
      const int pos = first + s;
      values[s - s0] =
          block_page(pos) + kv_heads_ * key_block_bytes_ + ((pos % kKvBlock) * kv_heads_ + g) * value_bytes_;
    }
    add_values(scores + s0, count, heads, values, n, hd_, out);
  }
}

}  // namespace tps
