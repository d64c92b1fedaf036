// The block formats tps computes with and their plain scalar conversions
// (spec §3.3). These are the references that every optimised kernel is
// tested against, and what the synthetic model writer quantizes with.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "engine/gguf/ggml_types.h"

namespace tps {

// Q8_0: 32 int8 values sharing an F16 scale. Element j = d * qs[j].
struct BlockQ8_0 {
  uint16_t d;  // F16
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// MXFP4: 32 E2M1 values sharing an E8M0 scale 2^(e - 127). Element j (0-15)
// is the low nibble of qs[j], element j + 16 its high nibble.
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockMxfp4) == 17);

// Q4_0: element j (0-15) = d * ((qs[j] & 15) - 8), element j + 16 uses the
// high nibble.
struct BlockQ4_0 {
  uint16_t d;  // F16
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

// E2M1 code (bit 3 = sign) -> value, times 2 so that it is an integer:
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 become 0, 1, 2, 3, 4, 6, 8, 12.
extern const int8_t kMxfp4DoubledValues[16];

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even; overflow -> inf
float bf16_to_fp32(uint16_t b);
uint16_t fp32_to_bf16(float f);  // round to nearest even; NaN stays NaN
// 2^k as a float for k in [-149, 127], built from its bits (exact, constexpr).
constexpr float exp2_int(int k) {
  return k >= -126 ? std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23)
                   : std::bit_cast<float>(uint32_t{0x00400000} >> (-127 - k));
}
// 2^(e - 127) as a float (e = 0 gives 2^-127, a denormal; 255 is not special).
constexpr float e8m0_to_fp32(uint8_t e) { return exp2_int(static_cast<int>(e) - 127); }
// 2^(e - 128), the scale that goes with the doubled E2M1 table, by lookup.
inline constexpr std::array<float, 256> kE8m0Half = [] {
  std::array<float, 256> t{};
  for (int e = 0; e < 256; ++e) t[e] = exp2_int(e - 128);
  return t;
}();

// Decodes n elements of a row of type into floats. Supported: F32, F16,
// BF16, Q8_0, Q4_0, MXFP4; others throw InputError naming the type.
void dequantize_row(GgmlType type, const uint8_t* src, float* dst, size_t n);

// Reference quantizers (n a multiple of 32). Q8_0: d = max|x| / 127,
// q = x * (1 / d) rounded to nearest, ties to even (ggml's scalar reference
// rounds ties away from zero; the two differ only on exact halves). MXFP4:
// scale 2^(floor(log2 max|x|) - 2) as ggml's reference does (the largest
// values may clip to 6 x scale), then each value to the nearest code, the
// lower code on a tie.
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, size_t n);
void quantize_row_mxfp4(const float* src, BlockMxfp4* dst, size_t n);

}  // namespace tps
