#include "engine/cache/kv_pool.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "runtime/log.h"

namespace tps {

namespace {
int64_t page_bytes(const ModelConfig& c, const Shard& s, KvType type) {
  const int hd = static_cast<int>(c.head_dim);
  return static_cast<int64_t>(s.share.kv_heads.size()) *
         (kv_key_block_bytes(type, hd) + int64_t{kKvBlock} * kv_value_bytes(type, hd));
}
int layers_of_kind(const ModelConfig& c, const Shard& s, BlockKind kind) {
  int n = 0;
  for (int64_t l = s.share.layers.begin; l < s.share.layers.end; ++l) n += kind_of_layer(c.is_sliding_layer(l)) == kind;
  return n;
}
}  // namespace

uint64_t KvPool::block_bytes(const ModelConfig& c, const Shard& s, KvType type, BlockKind kind) {
  return page_bytes(c, s, type) * layers_of_kind(c, s, kind);
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
      memory_(block_bytes(c, s, type, BlockKind::full) * full_blocks +
              block_bytes(c, s, type, BlockKind::sliding) * sliding_blocks) {
  int64_t pages = 0;
  for (int64_t l = s.share.layers.begin; l < s.share.layers.end; ++l) {
    place_[l].first_page = pages, place_[l].kind = kind_of_layer(c.is_sliding_layer(l));
    pages += c.is_sliding_layer(l) ? sliding_blocks : full_blocks;
  }
}

void KvPool::store(int layer, int block, int lane, const float* k, const float* v) {
  int clamped = 0;
  for (int g = 0; g < kv_heads_; ++g) {
    uint8_t* keys = head_keys(layer, block, g);
    clamped += store_keys(type_, keys, hd_, lane, k + g * hd_);
    clamped += store_values(type_, value_row(keys, lane), hd_, v + g * hd_);
  }
  if (clamped > 0 && !warned_) {  // once: a model that overflows the type does it at every token
    warned_ = true;
    log_warn("KV cache ", kv_type_name(type_), ": ", clamped, " key or value element(s) of layer ", layer,
             " beyond what it keeps (+-", kv_type_limit(type_),
             ") stored as that, not as inf; --kv-type f32 keeps them (said once)");
  }
}

void KvPool::copy_out(BlockKind kind, int block, uint8_t* to) const {
  for (size_t l = 0; l < place_.size(); ++l)
    if (place_[l].first_page >= 0 && place_[l].kind == kind) {
      std::memcpy(to, page(static_cast<int>(l), block), page_bytes_);
      to += page_bytes_;
    }
}

void KvPool::copy_in(BlockKind kind, int block, const uint8_t* from) {
  for (size_t l = 0; l < place_.size(); ++l)
    if (place_[l].first_page >= 0 && place_[l].kind == kind) {
      std::memcpy(page(static_cast<int>(l), block), from, page_bytes_);
      from += page_bytes_;
    }
}

int KvPool::run_of(int layer, std::span<const int32_t> table, int block0, int g, int first, int last,
                   const uint8_t** keys, const uint8_t** values) const {
  assert(chunk_first(first, 0) == first && chunk_last(first, last, 0) == last);
  const int b0 = first / kKvBlock;
  for (int b = b0; b <= last / kKvBlock; ++b) {
    uint8_t* at = head_keys(layer, table[b - block0], g);
    keys[b - b0] = at;
    for (int p = std::max(first, b * kKvBlock); p <= std::min(last, b * kKvBlock + kKvBlock - 1); ++p)
      values[p - first] = value_row(at, p % kKvBlock);
  }
  return first - b0 * kKvBlock;
}

void KvPool::attend_chunk(const KernelSet& k, int layer, std::span<const int32_t> table, int block0, const float* q,
                          int heads, int g, int first, int last, float scale, AttentionState state) const {
  clear_attention_state(state, heads, hd_);
  const uint8_t *keys[kAttendRunBlocks], *values[kAttentionChunk];
  const int lane = run_of(layer, table, block0, g, first, last, keys, values);
  k.attend_run[static_cast<int>(type_)](q, heads, hd_, keys, values, scale, lane, last - first + 1, state.max,
                                        state.sum, state.acc);
}

void KvPool::attend_tile_chunk(const KernelSet& k, int layer, std::span<const int32_t> table, int block0,
                               const float* const* q, int tokens, int heads, int g, int first, int last, float scale,
                               const AttentionState* states) const {
  for (int t = 0; t < tokens; ++t) clear_attention_state(states[t], heads, hd_);
  const uint8_t *keys[kAttendRunBlocks], *values[kAttentionChunk];
  const int lane = run_of(layer, table, block0, g, first, last, keys, values);
  k.attend_tile[static_cast<int>(type_)](q, tokens, heads, hd_, keys, values, scale, lane, last - first + 1, states);
}

void KvPool::attend(const KernelSet& k, int layer, std::span<const int32_t> table, int block0, const float* q,
                    int heads, int g, int first, int last, float scale, const float* sinks, float* scratch,
                    float* out) const {
  const AttentionState all = attention_state(scratch, heads);
  const AttentionState chunk = attention_state(scratch + attention_state_floats(heads, hd_), heads);
  clear_attention_state(all, heads, hd_);
  for (int c = 0; c < attention_chunks(first, last); ++c) {
    attend_chunk(k, layer, table, block0, q, heads, g, chunk_first(first, c), chunk_last(first, last, c), scale, chunk);
    merge_attention_state(chunk, all, heads, hd_);
  }
  finish_attention(all, sinks, heads, hd_, out);
}

}  // namespace tps
