// The ggml block formats' scalar conversions and quantizers: the
// references every kernel is tested against.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/gguf/quant_blocks.h"
#include "runtime/error.h"

namespace tps {
namespace {

TEST(QuantBlocks, HalfConversions) {
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));     // smallest denormal
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));  // largest denormal
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_EQ(fp16_to_fp32(0x7C00), INFINITY);
  EXPECT_EQ(fp16_to_fp32(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7C01)));  // signalling NaN stays NaN, not inf
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(fp32_to_fp16(1e30f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(NAN) & 0x7E00, 0x7E00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);         // tie to even (0)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);         // tie to even (2)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);         // underflows
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);      // rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Every half round-trips through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaNs
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(QuantBlocks, BfloatConversions) {
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xC040), -3.0f);
  EXPECT_EQ(bf16_to_fp32(0x0001), std::ldexp(1.0f, -133));  // denormal
  EXPECT_EQ(bf16_to_fp32(0x7F80), INFINITY);
  EXPECT_EQ(bf16_to_fp32(0xFF80), -INFINITY);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7FC0)));
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie to even (down)
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie to even (up)
  EXPECT_EQ(fp32_to_bf16(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(fp32_to_bf16(3.4028235e38f), 0x7F80);  // rounds to infinity
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xFF80);
  // A NaN whose payload is only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7F80) == 0x7F80 && (b & 0x7F)) continue;  // NaNs
    ASSERT_EQ(fp32_to_bf16(bf16_to_fp32(static_cast<uint16_t>(b))), b) << b;
  }
}

TEST(QuantBlocks, DequantizePlainRows) {
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7C00}, bf16[4] = {0x3F80, 0xC000, 0x0001, 0xFF80};
  float out[4];
  dequantize_row(GgmlType::F16, reinterpret_cast<const uint8_t*>(f16), out, 4);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{1, -2, std::ldexp(1.0f, -24), INFINITY}));
  dequantize_row(GgmlType::BF16, reinterpret_cast<const uint8_t*>(bf16), out, 4);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{1, -2, std::ldexp(1.0f, -133), -INFINITY}));
  const float f32[4] = {0.5f, -7, 1e-40f, 3};
  dequantize_row(GgmlType::F32, reinterpret_cast<const uint8_t*>(f32), out, 4);
  EXPECT_EQ(std::vector<float>(out, out + 4), std::vector<float>(f32, f32 + 4));
  try {
    dequantize_row(GgmlType::Q6_K, nullptr, out, 256);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "cannot decode tensor type Q6_K (tps decodes F32, F16, BF16, Q8_0, Q4_0, MXFP4)");
  }
}

TEST(QuantBlocks, Q8_0) {
  BlockQ8_0 b[2]{};
  b[0].d = 0x3800;  // 0.5
  b[0].qs[0] = -128, b[0].qs[1] = -1, b[0].qs[2] = 1, b[0].qs[31] = 127;
  b[1].d = 0xC000;  // -2: a negative scale is just a number
  b[1].qs[5] = 3;
  float out[64];
  dequantize_row(GgmlType::Q8_0, reinterpret_cast<const uint8_t*>(b), out, 64);
  EXPECT_EQ(out[0], -64.0f);
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[31], 63.5f);
  EXPECT_EQ(out[32 + 5], -6.0f);

  // max|x| = 127 gives d = 1 exactly: q is x rounded, halves to even.
  float x[32] = {127, -127, 2.5f, -3.5f, 0.49f, 1.5f};
  BlockQ8_0 q;
  quantize_row_q8_0(x, &q, 32);
  EXPECT_EQ(q.d, 0x3C00);
  EXPECT_EQ(std::vector<int>(q.qs, q.qs + 7), (std::vector<int>{127, -127, 2, -4, 0, 2, 0}));
  // Away from ties, quantize then dequantize is within half a step.
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.1f;
  quantize_row_q8_0(x, &q, 32);
  EXPECT_EQ(q.qs[0], -127);  // the largest magnitude maps to 127
  dequantize_row(GgmlType::Q8_0, reinterpret_cast<const uint8_t*>(&q), out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(out[i], x[i], 1.6f / 127 / 2 + 1e-3f) << i;
  const float zeros[32] = {};
  quantize_row_q8_0(zeros, &q, 32);
  EXPECT_EQ(q.d, 0);
  EXPECT_EQ(std::count(q.qs, q.qs + 32, 0), 32);
}

TEST(QuantBlocks, Q4_0) {
  BlockQ4_0 b{};
  b.d = 0x4000;                      // 2
  for (uint8_t& v : b.qs) v = 0x88;  // both nibbles 8: zero
  b.qs[0] = 0x0F;                    // element 0: 15 - 8 = 7, element 16: 0 - 8
  b.qs[3] = 0x98;                    // element 3: 0, element 19: 1
  b.qs[15] = 0x71;                   // element 15: -7, element 31: -1
  float out[32];
  dequantize_row(GgmlType::Q4_0, reinterpret_cast<const uint8_t*>(&b), out, 32);
  EXPECT_EQ(out[0], 14.0f);
  EXPECT_EQ(out[16], -16.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[19], 2.0f);
  EXPECT_EQ(out[15], -14.0f);
  EXPECT_EQ(out[31], -2.0f);
  EXPECT_EQ(out[7], 0.0f);
}

TEST(QuantBlocks, Mxfp4LayoutAndScale) {
  BlockMxfp4 b{};
  b.e = 128;        // 2^1
  b.qs[0] = 0x71;   // element 0: code 1 (0.5), element 16: code 7 (6)
  b.qs[1] = 0x3A;   // element 1: code 10 (-1), element 17: code 3 (1.5)
  b.qs[15] = 0xF9;  // element 15: code 9 (-0.5), element 31: code 15 (-6)
  float out[32];
  dequantize_row(GgmlType::MXFP4, reinterpret_cast<const uint8_t*>(&b), out, 32);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[16], 12.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[17], 3.0f);
  EXPECT_EQ(out[15], -1.0f);
  EXPECT_EQ(out[31], -12.0f);
  EXPECT_EQ(out[2], 0.0f);
  // E8M0: 2^(e - 127), no special values; the smallest scales are denormal.
  EXPECT_EQ(e8m0_to_fp32(127), 1.0f);
  EXPECT_EQ(e8m0_to_fp32(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_to_fp32(254), std::ldexp(1.0f, 127));
  for (uint8_t e : {0, 1, 100, 254}) {
    b.e = e;
    dequantize_row(GgmlType::MXFP4, reinterpret_cast<const uint8_t*>(&b), out, 32);
    EXPECT_EQ(out[0], std::ldexp(0.5f, e - 127)) << int{e};
    EXPECT_EQ(out[31], std::ldexp(-6.0f, e - 127)) << int{e};
  }
}

TEST(QuantBlocks, Mxfp4Quantizer) {
  float x[32], out[32];
  BlockMxfp4 q;
  // Values on the grid come back exactly.
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * kMxfp4DoubledValues[i % 16];
  quantize_row_mxfp4(x, &q, 32);
  EXPECT_EQ(q.e, 126);  // max 3: floor(log2 3) - 2 + 127
  dequantize_row(GgmlType::MXFP4, reinterpret_cast<const uint8_t*>(&q), out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], x[i]) << i;

  // max 7: scale 2^(2 - 2) = 1, and 7 clips to 6. Ties take the lower code.
  std::fill(x, x + 32, 0.0f);
  x[0] = 7, x[1] = -0.75f, x[2] = 0.75f, x[3] = 2.5f, x[4] = 0.2f, x[20] = -5;
  quantize_row_mxfp4(x, &q, 32);
  EXPECT_EQ(q.e, 127);
  EXPECT_EQ(q.qs[0] & 15, 7);   // 6
  EXPECT_EQ(q.qs[1] & 15, 9);   // -0.5
  EXPECT_EQ(q.qs[2] & 15, 1);   // 0.5
  EXPECT_EQ(q.qs[3] & 15, 4);   // 2
  EXPECT_EQ(q.qs[4] & 15, 0);   // 0
  EXPECT_EQ(q.qs[4] >> 4, 14);  // element 20: -5 -> -4, a tie between -4 and -6
  // All zeros: scale byte 0, codes 0. Tiny values use the smallest scale.
  std::fill(x, x + 32, 0.0f);
  quantize_row_mxfp4(x, &q, 32);
  EXPECT_EQ(q.e, 0);
  EXPECT_EQ(std::count(q.qs, q.qs + 16, 0), 16);
  x[0] = std::ldexp(1.5f, -125);
  quantize_row_mxfp4(x, &q, 32);
  EXPECT_EQ(q.e, 0);
  EXPECT_EQ(q.qs[0] & 15, 7);  // 1.5 * 2^-125 = 6 * 2^-127: code 7 (6)
}

}  // namespace
}  // namespace tps
