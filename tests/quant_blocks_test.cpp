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
    dequantize_row(GgmlType::IQ2_XXS, nullptr, out, 256);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "cannot decode tensor type IQ2_XXS");
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
  quantize_row(GgmlType::Q8_0, x, reinterpret_cast<uint8_t*>(&q), 32);
  EXPECT_EQ(q.d, 0x3C00);
  EXPECT_EQ(std::vector<int>(q.qs, q.qs + 7), (std::vector<int>{127, -127, 2, -4, 0, 2, 0}));
  // Away from ties, quantize then dequantize is within half a step.
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.1f;
  quantize_row(GgmlType::Q8_0, x, reinterpret_cast<uint8_t*>(&q), 32);
  EXPECT_EQ(q.qs[0], -127);  // the largest magnitude maps to 127
  dequantize_row(GgmlType::Q8_0, reinterpret_cast<const uint8_t*>(&q), out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(out[i], x[i], 1.6f / 127 / 2 + 1e-3f) << i;
  const float zeros[32] = {};
  quantize_row(GgmlType::Q8_0, zeros, reinterpret_cast<uint8_t*>(&q), 32);
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
  // Every E2M1 code against the OCP MX table, -0 (code 8) included: codes
  // j in element j and 16 + j, scale 2^0.
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  b.e = 127;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | j << 4);
  dequantize_row(GgmlType::MXFP4, reinterpret_cast<const uint8_t*>(&b), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], e2m1[j]) << "code " << j;
    EXPECT_EQ(out[16 + j], e2m1[j]) << "code " << j;
  }
}

TEST(QuantBlocks, Mxfp4Quantizer) {
  float x[32], out[32];
  BlockMxfp4 q;
  // Values on the grid come back exactly.
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * kMxfp4DoubledValues[i % 16];
  quantize_row(GgmlType::MXFP4, x, reinterpret_cast<uint8_t*>(&q), 32);
  EXPECT_EQ(q.e, 126);  // max 3: floor(log2 3) - 2 + 127
  dequantize_row(GgmlType::MXFP4, reinterpret_cast<const uint8_t*>(&q), out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], x[i]) << i;

  // max 7: scale 2^(2 - 2) = 1, and 7 clips to 6. Ties take the lower code.
  std::fill(x, x + 32, 0.0f);
  x[0] = 7, x[1] = -0.75f, x[2] = 0.75f, x[3] = 2.5f, x[4] = 0.2f, x[20] = -5;
  quantize_row(GgmlType::MXFP4, x, reinterpret_cast<uint8_t*>(&q), 32);
  EXPECT_EQ(q.e, 127);
  EXPECT_EQ(q.qs[0] & 15, 7);   // 6
  EXPECT_EQ(q.qs[1] & 15, 9);   // -0.5
  EXPECT_EQ(q.qs[2] & 15, 1);   // 0.5
  EXPECT_EQ(q.qs[3] & 15, 4);   // 2
  EXPECT_EQ(q.qs[4] & 15, 0);   // 0
  EXPECT_EQ(q.qs[4] >> 4, 14);  // element 20: -5 -> -4, a tie between -4 and -6
  // All zeros: scale byte 0, codes 0. Tiny values use the smallest scale.
  std::fill(x, x + 32, 0.0f);
  quantize_row(GgmlType::MXFP4, x, reinterpret_cast<uint8_t*>(&q), 32);
  EXPECT_EQ(q.e, 0);
  EXPECT_EQ(std::count(q.qs, q.qs + 16, 0), 16);
  x[0] = std::ldexp(1.5f, -125);
  quantize_row(GgmlType::MXFP4, x, reinterpret_cast<uint8_t*>(&q), 32);
  EXPECT_EQ(q.e, 0);
  EXPECT_EQ(q.qs[0] & 15, 7);  // 1.5 * 2^-125 = 6 * 2^-127: code 7 (6)
}

// Element maps of the other formats, each from a block built by hand with
// one element of interest per field (quant_blocks.h says where each is).
template <typename Block>
std::vector<float> decode(GgmlType type, const Block& b) {
  std::vector<float> out(ggml_type_info(static_cast<uint32_t>(type))->block_elems);
  dequantize_row(type, reinterpret_cast<const uint8_t*>(&b), out.data(), out.size());
  return out;
}

TEST(QuantBlocks, Block32Layouts) {
  BlockQ4_1 a{};
  a.d = 0x4000, a.m = 0xBC00;  // 2, -1
  a.qs[2] = 0x53;              // element 2: 3, element 18: 5
  auto y = decode(GgmlType::Q4_1, a);
  EXPECT_EQ(y[2], 5.0f);
  EXPECT_EQ(y[18], 9.0f);
  EXPECT_EQ(y[0], -1.0f);

  BlockQ5_0 b{};
  b.d = 0x3C00;
  for (uint8_t& v : b.qs) v = 0x00;
  b.qh[0] = 0x02, b.qh[3] = 0x80;  // bit 1 (element 1) and bit 31 (element 31)
  b.qs[1] = 0x07;                  // element 1: 7 | 16 = 23 - 16 = 7
  b.qs[15] = 0x20;                 // element 31: 2 | 16 = 18 - 16 = 2
  y = decode(GgmlType::Q5_0, b);
  EXPECT_EQ(y[1], 7.0f);
  EXPECT_EQ(y[31], 2.0f);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[17], -16.0f);

  BlockQ5_1 c{};
  c.d = 0x3800, c.m = 0x3C00;  // 0.5, 1
  c.qh[2] = 0x01;              // bit 16: element 16
  c.qs[0] = 0x30;              // element 16: 3 | 16 = 19
  y = decode(GgmlType::Q5_1, c);
  EXPECT_EQ(y[16], 10.5f);
  EXPECT_EQ(y[0], 1.0f);

  BlockIq4Nl d{};
  d.d = 0x3C00;
  d.qs[4] = 0xF8;  // element 4: level 8 (1), element 20: level 15 (113)
  y = decode(GgmlType::IQ4_NL, d);
  EXPECT_EQ(y[4], 1.0f);
  EXPECT_EQ(y[20], 113.0f);
  EXPECT_EQ(y[0], -127.0f);
}

TEST(QuantBlocks, KQuantLayouts) {
  BlockQ2_K a{};
  a.d = 0x3C00, a.dmin = 0x4000;  // 1, 2
  a.scales[0] = 0x13;             // sub-block 0: scale 3, min 1
  a.scales[13] = 0x05;            // sub-block 13 (elements 208..223): scale 5, min 0
  a.qs[5] = 0x02;                 // element 5 (h 0, j 0, l 5): q 2
  a.qs[32 + 16] = 0x03 << 4;      // element 128 + 64 + 16 = 208 (h 1, j 2, l 16): q 3
  auto y = decode(GgmlType::Q2_K, a);
  EXPECT_EQ(y[5], 1.0f * 3 * 2 - 2.0f * 1);
  EXPECT_EQ(y[208], 15.0f);
  EXPECT_EQ(y[0], -2.0f);

  BlockQ3_K b{};
  b.d = 0x3C00;
  // Sub-block 0 stored 32 + 3 (low 3, high 2 bits 10 -> 32), sub-block 9
  // stored 32 - 2 = 30 (low nibble 14 in scales[1] >> 4, high 1).
  b.scales[0] = 0x03, b.scales[8] |= 0x02;
  b.scales[1] = 0xE0, b.scales[8 + 1] |= 0x01 << 4;
  b.qs[7] = 0x03;        // element 7: low bits 3
  b.hmask[7] = 0x01;     // ... bit 0 set: no -4, q = 3
  b.qs[32 + 20] = 0x02;  // element 128 + 20 = 148 (sub-block 9): low 2, hmask clear: q = -2
  y = decode(GgmlType::Q3_K, b);
  EXPECT_EQ(q3_k_scale(b.scales, 0), 3);
  EXPECT_EQ(q3_k_scale(b.scales, 9), -2);
  EXPECT_EQ(y[7], 9.0f);
  EXPECT_EQ(y[148], 4.0f);
  EXPECT_EQ(y[0], -12.0f);  // q = 0 - 4, scale 3

  BlockQ4_K c{};
  c.d = 0x3C00, c.dmin = 0x3800;  // 1, 0.5
  // Sub-block 1: scale 5, min 2 (bytes 1 and 5); sub-block 6: scale 33
  // (low 1 in scales[10], high 2 in scales[2] bits 6-7), min 0.
  c.scales[1] = 5, c.scales[5] = 2;
  c.scales[10] = 0x01, c.scales[2] = 0x80;
  c.qs[3] = 0x40;       // element 32 + 3 = 35 (sub-block 1, high nibble of the first 32 bytes): 4
  c.qs[96 + 9] = 0x07;  // element 192 + 9 = 201 (sub-block 6, low nibble): 7
  auto y4 = decode(GgmlType::Q4_K, c);
  EXPECT_EQ(k4_scale_min(c.scales, 6).scale, 33);
  EXPECT_EQ(y4[35], 5.0f * 4 - 0.5f * 2);
  EXPECT_EQ(y4[201], 33.0f * 7);
  EXPECT_EQ(y4[32], -1.0f);

  BlockQ5_K d{};
  d.d = 0x3C00;
  d.scales[3] = 1;      // sub-block 3: scale 1
  d.qh[4] = 0x08;       // element 96 + 4 = 100: bit 3 (its sub-block)
  d.qs[32 + 4] = 0x20;  // element 100: high nibble of bytes 32.. (sub-block 3): 2
  EXPECT_EQ(decode(GgmlType::Q5_K, d)[100], 18.0f);

  BlockQ6_K e{};
  e.d = 0x3C00;
  e.scales[14] = -3;  // elements 224..239
  // element 230: h 1, k 3, l 6 -> ql[64 + 32 + 6] high nibble, qh[32 + 6] bits 6-7
  e.ql[102] = 0x50, e.qh[38] = 0x02 << 6;  // q = 5 | 2 << 4 = 37 -> 5
  auto y6 = decode(GgmlType::Q6_K, e);
  EXPECT_EQ(y6[230], -15.0f);
  EXPECT_EQ(y6[0], 0.0f);  // scale 0

  BlockIq4Xs f{};
  f.d = 0x4000;                                 // 2
  f.scales_l[1] = 0x30, f.scales_h = 0x2 << 6;  // sub-block 3: 3 | 2 << 4 = 35 -> 3
  f.qs[16 * 3 + 2] = 0xA0;                      // element 96 + 16 + 2 = 114: level 10 (25)
  auto yx = decode(GgmlType::IQ4_XS, f);
  EXPECT_EQ(iq4_xs_scale(f, 3), 3);
  EXPECT_EQ(yx[114], 2.0f * 3 * 25);
  EXPECT_EQ(yx[0], 2.0f * -32 * -127);  // scale code 0 -> -32, level 0
}

// Quantize then decode: every format's error is what its bits allow, on
// rows of normal values with an outlier.
TEST(QuantBlocks, EveryFormatRoundTrips) {
  struct Case {
    GgmlType type;
    double max_rel_rms;  // RMS error over RMS value
  };
  const Case cases[] = {{GgmlType::Q8_0, 0.01},   {GgmlType::Q6_K, 0.03}, {GgmlType::Q5_0, 0.06},
                        {GgmlType::Q5_1, 0.06},   {GgmlType::Q5_K, 0.06}, {GgmlType::Q4_0, 0.12},
                        {GgmlType::Q4_1, 0.12},   {GgmlType::Q4_K, 0.12}, {GgmlType::IQ4_NL, 0.12},
                        {GgmlType::IQ4_XS, 0.12}, {GgmlType::MXFP4, 0.2}, {GgmlType::Q3_K, 0.25},
                        {GgmlType::Q2_K, 0.5},    {GgmlType::F16, 1e-3},  {GgmlType::BF16, 1e-2}};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int n = 1024;
  std::vector<float> x(n), back(n);
  for (float& v : x) v = normal(rng);
  x[300] = 9;  // an outlier: one sub-block with a much larger scale
  for (const Case& c : cases) {
    SCOPED_TRACE(type_name(c.type));
    std::vector<uint8_t> q(row_bytes(c.type, n));
    quantize_row(c.type, x.data(), q.data(), n);
    dequantize_row(c.type, q.data(), back.data(), n);
    double err = 0, sum = 0;
    for (int i = 0; i < n; ++i) err += (back[i] - x[i]) * (back[i] - x[i]), sum += x[i] * x[i];
    EXPECT_LT(std::sqrt(err / sum), c.max_rel_rms);
    EXPECT_NEAR(back[300], 9.0f, 9.0f * c.max_rel_rms);
  }
  // All zeros stay zeros.
  std::vector<float> zeros(256, 0.0f);
  for (const Case& c : cases) {
    std::vector<uint8_t> q(row_bytes(c.type, 256));
    quantize_row(c.type, zeros.data(), q.data(), 256);
    dequantize_row(c.type, q.data(), back.data(), 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(back[i], 0.0f) << type_name(c.type) << " " << i;
  }
}

}  // namespace
}  // namespace tps
