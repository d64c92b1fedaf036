// How a KV cache stores its keys and values: --kv-type f32, f16, bf16, q8_0
// or q4_0. The element type sets the memory a position takes, and the
// bytes every decode step reads of the sequence's cache.
//
// Keys of one kv head come in key blocks of kKeyBlock positions, one lane
// per position, so that a block's scores come out together:
//   f32, f16, bf16: [head_dim][kKeyBlock] elements;
//   q8_0:           [head_dim][kKeyBlock] int8 codes, then
//                   [ceil(head_dim / 32)][kKeyBlock] f16 scales: each
//                   position's dimensions in blocks of 32 (the last may be
//                   shorter), value = scale x code;
//   q4_0:           [head_dim][kKeyBlock / 2] bytes of 4-bit codes (a
//                   dimension's 16 lanes in 8 bytes: lane j in byte j % 8,
//                   the high nibble for j >= 8), then the scales as q8_0's,
//                   value = scale x (code - 8).
// Values of one kv head at one position are a row of head_dim:
//   f32, f16, bf16: head_dim elements;
//   q8_0:           head_dim int8 codes, then ceil(head_dim / 32) f16 scales;
//   q4_0:           4-bit codes by groups of 16 dimensions, 8 bytes a group
//                   (dimension i of a group in byte i % 8, the high nibble
//                   for i >= 8; a short last group takes 8 bytes too), then
//                   the scales as q8_0's.
// q8_0's scales are Q8_0's (gguf/quant_blocks.h): max |x| / 127 of the 32
// values, codes round(x / scale). q4_0's are Q4_0's, by its codec (the
// value of largest magnitude / -8, codes round(x / scale) + 8 within
// 0..15): the same arithmetic as ggml's, in a layout the kernels read 8 or
// 16 codes at a time.
//
// The scalar kernels read through key_at and value_at (and key_code); the
// vector kernels read the same bytes and must give the same values.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "engine/gguf/quant_blocks.h"

namespace tps {

enum class KvType { f32, f16, bf16, q8_0, q4_0 };
constexpr int kKvTypeCount = 5;

// Keys in a block of a KV cache's keys (see above).
constexpr int kKeyBlock = 16;
// Dimensions per scale of q8_0 and q4_0.
constexpr int kKvScaleBlock = 32;
// The widest head the attention kernels take (model_config.cpp refuses
// wider ones): the size of their buffers for one query row.
constexpr int kMaxHeadDim = 512;

// What tpsrun uses without --kv-type: half f32's bytes, and the closest of
// the smaller types to f32 -- its KL divergence from f32 about twice what
// only adding in another order gives, half what Q8_0 weights cost against
// F16 (docs/QUALITY.md). llama.cpp's default too.
constexpr KvType kDefaultKvType = KvType::f16;

const char* kv_type_name(KvType type);
// Every name, for messages and help: "f32, f16, bf16, q8_0 or q4_0".
std::string kv_type_names();
// "f32", "f16", "bf16", "q8_0", "q4_0" (any case); nullopt for anything
// else.
std::optional<KvType> parse_kv_type(std::string_view text);

constexpr bool kv_quantized(KvType type) { return type == KvType::q8_0 || type == KvType::q4_0; }
inline int kv_scales(int head_dim) { return (head_dim + kKvScaleBlock - 1) / kKvScaleBlock; }
// Bytes of an element of a float type, of a q8_0 code (q4_0's codes are
// half bytes: kv_key_code_bytes and kv_value_code_bytes count them).
constexpr int kv_element_bytes(KvType type) {
  switch (type) {
    case KvType::f32: return 4;
    case KvType::f16:
    case KvType::bf16: return 2;
    case KvType::q8_0: return 1;
    case KvType::q4_0: return 0;
  }
  return 0;
}
// Bytes of the codes (or elements) of a key block, and of a values row:
// where the scales of the quantized types start.
inline uint64_t kv_key_code_bytes(KvType type, int head_dim) {
  return type == KvType::q4_0 ? uint64_t(head_dim) * (kKeyBlock / 2)
                              : uint64_t(head_dim) * kKeyBlock * kv_element_bytes(type);
}
inline uint64_t kv_value_code_bytes(KvType type, int head_dim) {
  return type == KvType::q4_0 ? uint64_t((head_dim + 15) / 16) * 8 : uint64_t(head_dim) * kv_element_bytes(type);
}
// Bytes of one kv head's key block, and of one kv head's values at one
// position.
inline uint64_t kv_key_block_bytes(KvType type, int head_dim) {
  return kv_key_code_bytes(type, head_dim) + (kv_quantized(type) ? uint64_t{kKeyBlock} * 2 * kv_scales(head_dim) : 0);
}
inline uint64_t kv_value_bytes(KvType type, int head_dim) {
  return kv_value_code_bytes(type, head_dim) + (kv_quantized(type) ? 2 * uint64_t(kv_scales(head_dim)) : 0);
}

// The largest magnitude a cache of the type keeps: f16's 65504, bf16's
// largest finite, q8_0's 127 codes x f16's largest scale (about 8.3e6),
// q4_0's 8 x f16's largest scale (about 5.2e5), f32 anything. A key or
// value beyond it (an infinity too) is stored as the nearest the type
// keeps, never as inf, which would turn attention into NaN. (q4_0 keeps
// only 7 x scale of the sign opposite its block's largest magnitude.)
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
// Code c of q4_0 codes kept by groups of 16 in 8 bytes (see above), less 8.
inline int q4_code(const uint8_t* p, int64_t c) {
  const uint8_t byte = p[(c / 16) * 8 + c % 8];
  return (c % 16 < 8 ? byte & 0x0F : byte >> 4) - 8;
}
// Element i of a row of the type (q8_0, q4_0: its code, q4_0's less 8).
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
    case KvType::q4_0: return static_cast<float>(q4_code(p, i));
  }
  return 0;
}
}  // namespace kv_detail

// Dimension i of the key at lane `lane` of key block kb: for the quantized
// types its code (q4_0's less 8), which key_scale multiplies.
inline float key_code(KvType type, const uint8_t* kb, int i, int lane) {
  return kv_detail::element(type, kb, int64_t{i} * kKeyBlock + lane);
}
inline float key_scale(KvType type, const uint8_t* kb, int head_dim, int i, int lane) {
  const uint8_t* scales = kb + kv_key_code_bytes(type, head_dim);
  return kv_detail::f16_at(scales + 2 * ((i / kKvScaleBlock) * kKeyBlock + lane));
}
// Dimension i of the key at lane `lane` of key block kb.
inline float key_at(KvType type, const uint8_t* kb, int head_dim, int i, int lane) {
  const float x = key_code(type, kb, i, lane);
  return kv_quantized(type) ? key_scale(type, kb, head_dim, i, lane) * x : x;
}
// Quantized keys (q8_0, q4_0) score a query quantized as Q8_0 quantizes:
// by blocks of n <= 32 dimensions, the scale max |x| / 127 (kept as a
// float), codes round(x x (1 / scale)) (0 for a block of zeros). So a
// block's score is an integer sum of code products times the two scales:
// exact in int32 and in float (32 x 127 x 127 < 2^24), the same in every
// kernel set, as llama.cpp scores its q8_0 keys. Writes codes[0..n) and
// returns the scale; a block with an infinity or NaN gets zero codes and a
// NaN scale, so its scores are NaN as float products would make them; a
// block too small for its scale to have a float inverse (max |x| under
// ~4e-37) is a block of zeros.
float query_codes(const float* x, int n, int8_t* codes);

// Dimension i of the values row v.
inline float value_at(KvType type, const uint8_t* v, int head_dim, int i) {
  const float x = kv_detail::element(type, v, i);
  if (!kv_quantized(type)) return x;
  return kv_detail::f16_at(v + kv_value_code_bytes(type, head_dim) + 2 * (i / kKvScaleBlock)) * x;
}

}  // namespace tps
