// The ggml block formats as GGUF files store them, and their plain scalar
// conversions both ways. These are the references every optimised kernel
// is tested against, and what the synthetic model writer quantizes with.
//
// Block layouts (all fields little-endian, F16 = IEEE half). "Element e" is
// the index within the block. Families:
//   32 elements: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 -- one scale
//     (and Q4_1/Q5_1 a min) per block; the 4-bit ones keep elements j and
//     j + 16 in the low and high nibble of byte j.
//   256 elements (K-quants, IQ4_XS): a super-block with an F16 scale (and a
//     min scale) over sub-blocks of 32 (Q4_K, Q5_K, IQ4_XS) or 16 (Q2_K,
//     Q3_K, Q6_K) elements, each with its own small integer scale.
// Each struct below says how element e's value is formed.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "engine/gguf/ggml_types.h"

namespace tps {

// Q4_0: value = d * (nibble - 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
// Q4_1: value = d * nibble + m.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
// Q5_0: value = d * (nibble | bit << 4) - 16 d; element e's fifth bit is
// bit e of qh (little-endian 32 bits).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
// Q5_1: value = d * (nibble | bit << 4) + m.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// Q8_0: value = d * qs[e].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
// IQ4_NL: value = d * kIq4NlValues[nibble].
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
// MXFP4: value = 2^(e - 127) * E2M1(nibble) (kMxfp4DoubledValues / 2).
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[16];
};
// Q2_K: sub-block s = e / 16; value = d * (scales[s] & 15) * q -
// dmin * (scales[s] >> 4), q = 2 bits: of qs[32 h + l] at bit 2 j, where
// h = e / 128, j = (e / 32) % 4, l = e % 32.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
// Q3_K: sub-block s = e / 16 with a 6-bit signed scale (stored + 32:
// low 4 bits in scales[s] (s < 8) or scales[s - 8] >> 4, high 2 bits in
// scales[8 + s % 4] at bit 2 (s / 4)); value = d * scale * q, q = the 2
// bits of qs[32 h + l] at bit 2 j, less 4 unless bit 4 h + j of hmask[l]
// is set (h, j, l as Q2_K).
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// Q4_K: sub-block s = e / 32 with a 6-bit scale and min (k4_scale_min);
// value = d * scale * q - dmin * min, q = nibble of qs[32 (e / 64) + e % 32],
// low for (e / 32) even, high for odd.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// Q5_K: as Q4_K, q = nibble | (bit s of qh[e % 32]) << 4.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Q6_K: sub-block s = e / 16 with a signed 8-bit scale; value = d *
// scales[s] * (q - 32), q = nibble | two bits << 4: with h = e / 128,
// k = (e / 32) % 4, l = e % 32, the nibble of ql[64 h + 32 (k % 2) + l]
// (low for k < 2) and bits 2k, 2k + 1 of qh[32 h + l].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// IQ4_XS: sub-block s = e / 32 with a 6-bit signed scale (stored + 32: low
// 4 bits in scales_l[s / 2], the low nibble for even s; high 2 bits at bit
// 2s of scales_h); value = d * scale * kIq4NlValues[nibble], the nibbles of
// sub-block s in qs[16 s..16 s + 15] as IQ4_NL's.
struct BlockIq4Xs {
  uint16_t d, scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockIq4Nl) == 18 &&
              sizeof(BlockMxfp4) == 17 && sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 &&
              sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 &&
              sizeof(BlockIq4Xs) == 136);

// E2M1 code (bit 3 = sign) -> value, times 2 so that it is an integer:
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 become 0, 1, 2, 3, 4, 6, 8, 12.
extern const int8_t kMxfp4DoubledValues[16];
// IQ4_NL and IQ4_XS: the 16 non-linear levels a nibble selects.
extern const int8_t kIq4NlValues[16];

// Q4_K/Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes.
struct ScaleMin {
  uint8_t scale, min;
};
ScaleMin k4_scale_min(const uint8_t* scales, int j);
// Q3_K sub-block s's signed scale (-32..31).
int q3_k_scale(const uint8_t* scales, int s);
// IQ4_XS sub-block s's signed scale (-32..31).
int iq4_xs_scale(const BlockIq4Xs& b, int s);

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

// Whether tps decodes rows of this type (F32, F16, BF16 and every block
// format above).
bool can_decode(GgmlType type);

// Decodes n elements of a row of type into floats; n a multiple of the
// type's block. Types tps cannot decode throw InputError naming the type.
void dequantize_row(GgmlType type, const uint8_t* src, float* dst, size_t n);

// A block's values as integer codes and its scale fields unpacked, as the
// packed layout (kernels/packed_rows.h) keeps them. Codes: Q4_0, Q4_1,
// IQ4_NL, Q4_K, IQ4_XS the nibble (IQ4's the index of its level); Q5_0,
// Q5_1, Q5_K the 5 bits; Q6_K the 6 bits (value d * scale * (code - 32));
// Q3_K the 2 low bits and bit 2 set when the hmask bit is (value d * scale
// * (code - 4)); Q2_K the 2 bits.
struct BlockFields {
  uint16_t d = 0, m = 0;                // F16 bits: d; Q4_1/Q5_1's m, the K-quants' dmin
  int8_t scale[16] = {}, min[16] = {};  // per sub-block (of 32 values: 8; of 16: 16)
};
// Codes of the type's block (32 or 256 of them) and its fields; for every
// block format above but Q8_0 and MXFP4 (packed as they are stored).
void block_fields(GgmlType type, const uint8_t* block, uint8_t* codes, BlockFields& fields);

// Encodes n floats (a multiple of the type's block) as a row of type: F16,
// BF16 and every block format above, by round to nearest (no search for
// the best scales, as ggml's quantizers do; enough for test files).
//   Q8_0: d = max|x| / 127, q = x / d rounded to nearest, ties to even.
//   MXFP4: scale 2^(floor(log2 max|x|) - 2) as ggml's reference, values
//     beyond 6 x scale clip; each value to the nearest code, the lower on
//     a tie.
//   The others: the largest magnitude maps to the format's extreme level
//     (sub-block scales from the largest sub-block's), codes rounded to
//     nearest.
void quantize_row(GgmlType type, const float* src, uint8_t* dst, size_t n);

}  // namespace tps
