#include "engine/gguf/quant_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/gguf/block_codecs.h"
#include "runtime/error.h"

namespace tps {

const int8_t kMxfp4DoubledValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
const int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // denormal: value = mant * 2^-24
      bits = std::bit_cast<uint32_t>(std::ldexp(static_cast<float>(mant), -24)) | sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf or NaN
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs > 0x7F800000) return sign | 0x7E00;   // NaN
  if (abs >= 0x477FF000) return sign | 0x7C00;  // rounds to >= 65520: inf
  if (abs < 0x38800000) {                       // below 2^-14: denormal or zero
    // value / 2^-24 rounded to nearest even, in float arithmetic (exact).
    return sign | static_cast<uint16_t>(std::nearbyint(std::bit_cast<float>(abs) * 16777216.0f));
  }
  uint32_t rounded = abs + 0xFFF + ((abs >> 13) & 1);  // round mantissa to 10 bits, ties even
  return sign | static_cast<uint16_t>((rounded - 0x38000000) >> 13);
}

float bf16_to_fp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

ScaleMin k4_scale_min(const uint8_t* q, int j) {
  if (j < 4) return {static_cast<uint8_t>(q[j] & 63), static_cast<uint8_t>(q[j + 4] & 63)};
  return {static_cast<uint8_t>((q[j + 4] & 0x0F) | (q[j - 4] >> 6) << 4),
          static_cast<uint8_t>((q[j + 4] >> 4) | (q[j] >> 6) << 4)};
}

int q3_k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0x0F : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | high << 4) - 32;
}

int iq4_xs_scale(const BlockIq4Xs& b, int s) {
  const int low = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
  const int high = (b.scales_h >> (2 * s)) & 3;
  return (low | high << 4) - 32;
}

namespace {

const BlockCodec* codec(GgmlType type) {
  const BlockCodec* c = block32_codec(type);
  return c ? c : block256_codec(type);
}

void half_row(GgmlType type, const uint8_t* src, float* dst, size_t n) {
  float (*convert)(uint16_t) = type == GgmlType::F16 ? fp16_to_fp32 : bf16_to_fp32;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = convert(h);
  }
}

}  // namespace

bool can_decode(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 || codec(type) != nullptr;
}

void dequantize_row(GgmlType type, const uint8_t* src, float* dst, size_t n) {
  if (type == GgmlType::F32) return static_cast<void>(std::memcpy(dst, src, n * 4));
  if (type == GgmlType::F16 || type == GgmlType::BF16) return half_row(type, src, dst, n);
  const BlockCodec* c = codec(type);
  if (!c) throw InputError(cat("cannot decode tensor type ", type_name(type)));
  const GgmlTypeInfo info = *ggml_type_info(static_cast<uint32_t>(type));
  for (size_t b = 0; b < n / info.block_elems; ++b) c->decode(src + b * info.block_bytes, dst + b * info.block_elems);
}

void block_fields(GgmlType type, const uint8_t* block, uint8_t* codes, BlockFields& fields) {
  const BlockCodec* c = codec(type);
  if (!c || !c->fields) throw Error(cat("no block fields for type ", type_name(type)));
  fields = BlockFields{};
  c->fields(block, codes, fields);
}

void quantize_row(GgmlType type, const float* src, uint8_t* dst, size_t n) {
  if (type == GgmlType::F16 || type == GgmlType::BF16) {
    uint16_t (*convert)(float) = type == GgmlType::F16 ? fp32_to_fp16 : fp32_to_bf16;
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = convert(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return;
  }
  if (type == GgmlType::F32) return static_cast<void>(std::memcpy(dst, src, n * 4));
  const BlockCodec* c = codec(type);
  if (!c) throw InputError(cat("cannot encode tensor type ", type_name(type)));
  const GgmlTypeInfo info = *ggml_type_info(static_cast<uint32_t>(type));
  for (size_t b = 0; b < n / info.block_elems; ++b) c->encode(src + b * info.block_elems, dst + b * info.block_bytes);
}

}  // namespace tps
