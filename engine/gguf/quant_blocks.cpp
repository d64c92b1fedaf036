#include "engine/gguf/quant_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/error.h"

namespace tps {

const int8_t kMxfp4DoubledValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

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

void dequantize_row(GgmlType type, const uint8_t* src, float* dst, size_t n) {
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * 4); return;
    case GgmlType::F16:
    case GgmlType::BF16: {
      float (*convert)(uint16_t) = type == GgmlType::F16 ? fp16_to_fp32 : bf16_to_fp32;
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = convert(h);
      }
      return;
    }
    case GgmlType::Q8_0:
      for (size_t b = 0; b < n / 32; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 32; ++j) dst[b * 32 + j] = d * blk.qs[j];
      }
      return;
    case GgmlType::Q4_0:
      for (size_t b = 0; b < n / 32; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 16; ++j) {
          dst[b * 32 + j] = d * ((blk.qs[j] & 0x0F) - 8);
          dst[b * 32 + j + 16] = d * ((blk.qs[j] >> 4) - 8);
        }
      }
      return;
    case GgmlType::MXFP4:
      for (size_t b = 0; b < n / 32; ++b) {
        BlockMxfp4 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        const float d = kE8m0Half[blk.e];  // the table is doubled
        for (int j = 0; j < 16; ++j) {
          dst[b * 32 + j] = d * kMxfp4DoubledValues[blk.qs[j] & 0x0F];
          dst[b * 32 + j + 16] = d * kMxfp4DoubledValues[blk.qs[j] >> 4];
        }
      }
      return;
    default:
      throw InputError(
          cat("cannot decode tensor type ", type_name(type), " (tps decodes F32, F16, BF16, Q8_0, Q4_0, MXFP4)"));
  }
}

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float* x = src + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; ++j) dst[b].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  }
}

void quantize_row_mxfp4(const float* src, BlockMxfp4* dst, size_t n) {
  for (size_t b = 0; b < n / 32; ++b) {
    const float* x = src + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // ggml's choice: scale 2^(floor(log2 amax) - 2), so amax / scale is in
    // [4, 8); values beyond 6 x scale clip to +-6 -- precision for the many
    // small values over range for the largest.
    int e = 0;
    if (amax > 0) {
      int k = 0;
      std::frexp(amax, &k);  // amax = m * 2^k, m in [0.5, 1): floor(log2 amax) = k - 1
      // Below 2^-125 the exponent would be negative: the smallest scale is
      // the best there is. (No float reaches 2^128, so 255 never arises.)
      e = std::max(k - 3 + 127, 0);
    }
    dst[b].e = static_cast<uint8_t>(e);
    const float d = kE8m0Half[e];
    auto code = [&](float v) {
      int best = 0;
      float err = INFINITY;
      for (int c = 0; c < 16; ++c) {
        float diff = std::fabs(v - d * kMxfp4DoubledValues[c]);
        if (diff < err) err = diff, best = c;
      }
      return best;
    };
    for (int j = 0; j < 16; ++j) dst[b].qs[j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + 16]) << 4));
  }
}

}  // namespace tps
