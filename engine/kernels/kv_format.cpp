#include "engine/kernels/kv_format.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <string>

#include "engine/gguf/quant_blocks.h"

namespace tps {

namespace {

constexpr const char* kNames[kKvTypeCount] = {"f32", "f16", "bf16", "q8_0", "q4_0"};

void put_f16(uint8_t* p, float x) {
  const uint16_t h = fp32_to_fp16(x);
  std::memcpy(p, &h, 2);
}

constexpr float kF16Max = 65504.0f;

// x clamped to [-limit, limit], counting what was beyond (NaN stays NaN).
float clamp_counted(float x, float limit, int& clamped) {
  if (!(std::fabs(x) > limit)) return x;
  ++clamped;
  return std::copysign(limit, x);
}

// Writes element `index` of a row of a float type (kv_detail::element's
// index): x as the type keeps it (clamped, counted, to its limit).
void put_element(KvType type, uint8_t* p, int64_t index, float x, int& clamped) {
  uint8_t* e = p + index * kv_element_bytes(type);
  const float kept = clamp_counted(x, kv_type_limit(type), clamped);
  uint16_t h;
  switch (type) {
    case KvType::f32: std::memcpy(e, &x, 4); break;
    case KvType::f16: h = fp32_to_fp16(kept), std::memcpy(e, &h, 2); break;
    case KvType::bf16: h = fp32_to_bf16(kept), std::memcpy(e, &h, 2); break;
    default: break;
  }
}
// Writes code `index` of a quantized type's codes: q8_0's int8, q4_0's
// nibble (kv_format.h: by groups of 16 in 8 bytes).
void put_code(KvType type, uint8_t* p, int64_t index, int code) {
  if (type == KvType::q8_0) {
    p[index] = static_cast<uint8_t>(static_cast<int8_t>(code));
    return;
  }
  uint8_t& byte = p[(index / 16) * 8 + index % 8];
  byte = index % 16 < 8 ? static_cast<uint8_t>((byte & 0xF0) | code) : static_cast<uint8_t>((byte & 0x0F) | code << 4);
}

// Q8_0's scale of x[0..n) and its codes: max |x| / 127, at most f16's
// largest (the values past 127 times it counted as clamped), codes
// round(x x (1 / scale)) within +-127.
float q8_block(const float* x, int n, int* codes, int& clamped) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float limit = kv_type_limit(KvType::q8_0);
  if (amax > limit)
    for (int i = 0; i < n; ++i) clamped += std::fabs(x[i]) > limit;
  const float d = std::min(amax / 127.0f, kF16Max), inverse = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) codes[i] = static_cast<int>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
  return d;
}
// Q4_0's scale of x[0..n) (n <= 32) and its codes (0..15), by the Q4_0
// codec on the values clamped (counted) to q4_0's limit, the block padded
// with zeros, which change neither the scale nor the other codes.
float q4_block(const float* x, int n, int* codes, int& clamped) {
  float block[kKvScaleBlock] = {};
  for (int i = 0; i < n; ++i) block[i] = clamp_counted(x[i], kv_type_limit(KvType::q4_0), clamped);
  uint8_t packed[sizeof(BlockQ4_0)], code[kKvScaleBlock];
  quantize_row(GgmlType::Q4_0, block, packed, kKvScaleBlock);
  BlockFields fields;
  block_fields(GgmlType::Q4_0, packed, code, fields);
  for (int i = 0; i < n; ++i) codes[i] = code[i];
  return fp16_to_fp32(fields.d);
}

// One row of head_dim values, element i at index first + stride x i of p
// (kv_detail::element's index), the quantized types' scales spaced
// `scale_stride` f16s apart at scales; how many it clamped.
int store_row(KvType type, uint8_t* p, int64_t first, int64_t stride, uint8_t* scales, int64_t scale_stride,
              int head_dim, const float* x) {
  int clamped = 0;
  if (!kv_quantized(type)) {
    for (int i = 0; i < head_dim; ++i) put_element(type, p, first + stride * i, x[i], clamped);
    return clamped;
  }
  for (int b = 0; b * kKvScaleBlock < head_dim; ++b) {
    const int i0 = b * kKvScaleBlock, n = std::min(kKvScaleBlock, head_dim - i0);
    int codes[kKvScaleBlock];
    const float d = type == KvType::q8_0 ? q8_block(x + i0, n, codes, clamped) : q4_block(x + i0, n, codes, clamped);
    put_f16(scales + 2 * scale_stride * b, d);
    for (int i = 0; i < n; ++i) put_code(type, p, first + stride * (i0 + i), codes[i]);
  }
  return clamped;
}

}  // namespace

const char* kv_type_name(KvType type) { return kNames[static_cast<int>(type)]; }

std::string kv_type_names() {
  std::string names;
  for (int t = 0; t < kKvTypeCount; ++t)
    names += (t == 0 ? "" : t + 1 < kKvTypeCount ? ", " : " or ") + std::string(kNames[t]);
  return names;
}

std::optional<KvType> parse_kv_type(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int t = 0; t < kKvTypeCount; ++t)
    if (lower == kNames[t]) return static_cast<KvType>(t);
  return std::nullopt;
}

float kv_type_limit(KvType type) {
  switch (type) {
    case KvType::f32: return INFINITY;
    case KvType::f16: return kF16Max;
    case KvType::bf16: return bf16_to_fp32(0x7F7F);
    case KvType::q8_0: return 127 * kF16Max;
    case KvType::q4_0: return 8 * kF16Max;
  }
  return INFINITY;
}

float query_codes(const float* x, int n, int8_t* codes) {
  float amax = 0;
  bool finite = true;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i])), finite = finite && std::isfinite(x[i]);
  if (!finite) {
    std::fill(codes, codes + n, int8_t{0});
    return NAN;
  }
  float d = amax / 127.0f, inverse = d != 0 ? 1.0f / d : 0.0f;
  if (inverse > FLT_MAX) d = 0, inverse = 0;  // no float inverse: a block of zeros
  for (int i = 0; i < n; ++i)
    codes[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
  return d;
}

int store_keys(KvType type, uint8_t* kb, int head_dim, int lane, const float* k) {
  return store_row(type, kb, lane, kKeyBlock, kb + kv_key_code_bytes(type, head_dim) + 2 * lane, kKeyBlock, head_dim,
                   k);
}

int store_values(KvType type, uint8_t* out, int head_dim, const float* v) {
  return store_row(type, out, 0, 1, out + kv_value_code_bytes(type, head_dim), 1, head_dim, v);
}

}  // namespace tps
