// How a KV cache stores its keys and values: --kv-type f32, f16, bf16 or
// q8_0. The element type sets the memory a position takes, and the bytes
// every decode step reads of the sequence's cache.
//
// Keys of one kv head come in key blocks of kKeyBlock positions, one lane
// per position, so that a block's scores come out together:
//   f32, f16, bf16: [head_dim][kKeyBlock] elements;
//   q8_0:           [head_dim][kKeyBlock] int8 codes, then
//                   [ceil(head_dim / 32)][kKeyBlock] f16 scales: each
//                   position's dimensions in blocks of 32 (the last may be
//                   shorter), value = scale x code.
// Values of one kv head at one position are a row of head_dim:
//   f32, f16, bf16: head_dim elements;
//   q8_0:           head_dim int8 codes, then ceil(head_dim / 32) f16 scales.
// q8_0's scales are Q8_0's (gguf/quant_blocks.h): max |x| / 127 of the 32
// values, codes round(x / scale).
//
// The scalar kernels read through key_at and value_at; the vector kernels
// read the same bytes and must give the same values.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "engine/gguf/quant_blocks.h"

namespace tps {

enum class KvType { f32, f16, bf16, q8_0 };
constexpr int kKvTypeCount = 4;

// Keys in a block of a KV cache's keys (see above).
constexpr int kKeyBlock = 16;
// Dimensions per q8_0 scale.
constexpr int kKvQ8Block = 32;

// What tpsrun uses without --kv-type: half f32's bytes, and the closest of
// the smaller types to f32 -- its KL divergence from f32 about twice what
// only adding in another order gives, half what Q8_0 weights cost against
// F16 (docs/QUALITY.md). llama.cpp's default too.
constexpr KvType kDefaultKvType = KvType::f16;

const char* kv_type_name(KvType type);
// Every name, for messages and help: "f32, f16, bf16 or q8_0".
std::string kv_type_names();
// "f32", "f16", "bf16", "q8_0" (any case); nullopt for anything else.
std::optional<KvType> parse_kv_type(std::string_view text);

inline int kv_q8_scales(int head_dim) { return (head_dim + kKvQ8Block - 1) / kKvQ8Block; }
inline int kv_element_bytes(KvType type) { return type == KvType::f32 ? 4 : type == KvType::q8_0 ? 1 : 2; }
// Bytes of one kv head's key block, and of one kv head's values at one
// position.
inline uint64_t kv_key_block_bytes(KvType type, int head_dim) {
  return uint64_t{kKeyBlock} *
         (head_dim * kv_element_bytes(type) + (type == KvType::q8_0 ? 2 * kv_q8_scales(head_dim) : 0));
}
inline uint64_t kv_value_bytes(KvType type, int head_dim) {
  return uint64_t(head_dim) * kv_element_bytes(type) + (type == KvType::q8_0 ? 2 * kv_q8_scales(head_dim) : 0);
}

// The largest magnitude a cache of the type keeps: f16's 65504, bf16's
// largest finite, q8_0's 127 codes x f16's largest scale (about 8.3e6), f32
// anything. A key or value beyond it (an infinity too) is stored as the
// nearest the type keeps, never as inf, which would turn attention into NaN.
float kv_type_limit(KvType type);

// Writes one position's keys k[head_dim] into lane `lane` of key block kb,
// and one position's values v[head_dim] into the row at out. Return how many
// of the head_dim they clamped to kv_type_limit (the caller warns).
int store_keys(KvType type, uint8_t* kb, int head_dim, int lane, const float* k);
int store_values(KvType type, uint8_t* out, int head_dim, const float* v);

namespace kv_detail {
inline uint16_t u16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}
inline float f16_at(const uint8_t* p) { return fp16_to_fp32(u16_at(p)); }
// Element i of a row of the type (q8_0: its code).
inline float element(KvType type, const uint8_t* p, int64_t i) {
  switch (type) {
    case KvType::f32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case KvType::f16: return f16_at(p + 2 * i);
    case KvType::bf16: return bf16_to_fp32(u16_at(p + 2 * i));
    case KvType::q8_0: return static_cast<int8_t>(p[i]);
  }
  return 0;
}
}  // namespace kv_detail

// Dimension i of the key at lane `lane` of key block kb.
inline float key_at(KvType type, const uint8_t* kb, int head_dim, int i, int lane) {
  const float x = kv_detail::element(type, kb, int64_t{i} * kKeyBlock + lane);
  if (type != KvType::q8_0) return x;
  const uint8_t* scales = kb + int64_t{head_dim} * kKeyBlock;
  return kv_detail::f16_at(scales + 2 * ((i / kKvQ8Block) * kKeyBlock + lane)) * x;
}
// Dimension i of the values row v.
inline float value_at(KvType type, const uint8_t* v, int head_dim, int i) {
  const float x = kv_detail::element(type, v, i);
  if (type != KvType::q8_0) return x;
  return kv_detail::f16_at(v + head_dim + 2 * (i / kKvQ8Block)) * x;
}

}  // namespace tps
