#include "engine/kernels/kv_format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace tps {

namespace {

constexpr const char* kNames[kKvTypeCount] = {"f32", "f16", "bf16", "q8_0"};

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

// Writes x[i], i < n, as the type's elements `stride` elements apart from p;
// q8_0: the codes round(x[i] x inverse_scale) only, within +-127.
void put_elements(KvType type, uint8_t* p, int64_t stride, const float* x, int n, float inverse_scale, int& clamped) {
  const float limit = kv_type_limit(type);
  for (int i = 0; i < n; ++i) {
    uint8_t* e = p + stride * i * kv_element_bytes(type);
    uint16_t h;
    switch (type) {
      case KvType::f32: std::memcpy(e, &x[i], 4); break;
      case KvType::f16: h = fp32_to_fp16(clamp_counted(x[i], limit, clamped)), std::memcpy(e, &h, 2); break;
      case KvType::bf16: h = fp32_to_bf16(clamp_counted(x[i], limit, clamped)), std::memcpy(e, &h, 2); break;
      case KvType::q8_0:
        *e = static_cast<uint8_t>(
            static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inverse_scale), -127.0f, 127.0f)));
        break;
    }
  }
}

// Q8_0's scale of x[0..n): max |x| / 127, at most f16's largest (the values
// past 127 times it counted as clamped).
float q8_scale(const float* x, int n, int& clamped) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float limit = kv_type_limit(KvType::q8_0);
  if (amax > limit)
    for (int i = 0; i < n; ++i) clamped += std::fabs(x[i]) > limit;
  return std::min(amax / 127.0f, kF16Max);
}

// One row of head_dim values spaced `stride` elements apart at p (codes),
// with its scales spaced `scale_stride` f16s apart at scales; how many it
// clamped.
int store_row(KvType type, uint8_t* p, int64_t stride, uint8_t* scales, int64_t scale_stride, int head_dim,
              const float* x) {
  int clamped = 0;
  if (type != KvType::q8_0) {
    put_elements(type, p, stride, x, head_dim, 0, clamped);
    return clamped;
  }
  for (int b = 0; b * kKvQ8Block < head_dim; ++b) {
    const int i0 = b * kKvQ8Block, n = std::min(kKvQ8Block, head_dim - i0);
    const float d = q8_scale(x + i0, n, clamped);
    put_f16(scales + 2 * scale_stride * b, d);
    int unused = 0;  // the codes' clamping is the scale's, counted there
    put_elements(type, p + stride * i0, stride, x + i0, n, d != 0 ? 1.0f / d : 0.0f, unused);
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
  }
  return INFINITY;
}

int store_keys(KvType type, uint8_t* kb, int head_dim, int lane, const float* k) {
  const int64_t lane_bytes = int64_t{lane} * kv_element_bytes(type);
  return store_row(type, kb + lane_bytes, kKeyBlock, kb + int64_t{head_dim} * kKeyBlock + 2 * lane, kKeyBlock, head_dim,
                   k);
}

int store_values(KvType type, uint8_t* out, int head_dim, const float* v) {
  return store_row(type, out, 1, out + head_dim, 1, head_dim, v);
}

}  // namespace tps
