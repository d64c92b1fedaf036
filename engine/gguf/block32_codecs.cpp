// The 32-element block formats (quant_blocks.h), decoded and encoded one
// block at a time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/gguf/block_codecs.h"
#include "engine/gguf/quant_blocks.h"

namespace tps {
namespace {

// Element j of 4-bit codes (j < 16: low nibble of byte j, else high of j - 16).
int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4; }
// Element j's 5-bit code: its nibble and bit j of qh.
int five_bits(const uint8_t* qs, uint32_t qh, int j) { return nibble(qs, j) | static_cast<int>((qh >> j) & 1) << 4; }
void put_nibbles(const int* codes, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(codes[j] | codes[j + 16] << 4);
}
uint32_t high_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}
// 5-bit codes: the low 4 bits as nibbles, bit 4 of code j at bit j of qh.
void put_five_bits(const int* codes, uint8_t* qs, uint8_t* qh) {
  int low[32];
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j) low[j] = codes[j] & 0x0F, h |= static_cast<uint32_t>(codes[j] >> 4) << j;
  put_nibbles(low, qs);
  std::memcpy(qh, &h, 4);
}

// The index of kIq4NlValues nearest v (the lower of two as near).
int iq4_nl_index(float v) {
  int best = 0;
  float err = std::numeric_limits<float>::infinity();
  for (int i = 0; i < 16; ++i) {
    const float e = std::fabs(v - kIq4NlValues[i]);
    if (e < err) err = e, best = i;
  }
  return best;
}

// Symmetric formats: the largest magnitude m maps to level `extreme`
// (Q4_0: -8, Q5_0: -16, with m's sign flipped so that its code is 0), the
// others to the nearest level; codes clamp to [0, top].
void encode_symmetric(const float* x, float extreme, int offset, int top, uint16_t& d_out, int* codes) {
  const float d = signed_absmax(x, 32) / extreme, id = d != 0 ? 1.0f / d : 0.0f;
  d_out = fp32_to_fp16(d);
  for (int j = 0; j < 32; ++j) codes[j] = std::clamp(nearest(x[j] * id) + offset, 0, top);
}
// Formats with a min: min -> code 0, max -> code top.
void encode_min(const float* x, int top, uint16_t& d_out, uint16_t& m_out, int* codes) {
  const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
  const float d = (hi - lo) / top, id = d != 0 ? 1.0f / d : 0.0f;
  d_out = fp32_to_fp16(d), m_out = fp32_to_fp16(lo);
  for (int j = 0; j < 32; ++j) codes[j] = std::clamp(nearest((x[j] - lo) * id), 0, top);
}

void decode_q4_0(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ4_0>(p);
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < 32; ++j) y[j] = d * (nibble(b.qs, j) - 8);
}
void encode_q4_0(const float* x, uint8_t* p) {
  BlockQ4_0 b;
  int codes[32];
  encode_symmetric(x, -8, 8, 15, b.d, codes);
  put_nibbles(codes, b.qs);
  store_block(b, p);
}

void decode_q4_1(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ4_1>(p);
  const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
  for (int j = 0; j < 32; ++j) y[j] = d * nibble(b.qs, j) + m;
}
void encode_q4_1(const float* x, uint8_t* p) {
  BlockQ4_1 b;
  int codes[32];
  encode_min(x, 15, b.d, b.m, codes);
  put_nibbles(codes, b.qs);
  store_block(b, p);
}

void decode_q5_0(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ5_0>(p);
  const float d = fp16_to_fp32(b.d);
  const uint32_t h = high_bits(b.qh);
  for (int j = 0; j < 32; ++j) y[j] = d * (five_bits(b.qs, h, j) - 16);
}
void encode_q5_0(const float* x, uint8_t* p) {
  BlockQ5_0 b;
  int codes[32];
  encode_symmetric(x, -16, 16, 31, b.d, codes);
  put_five_bits(codes, b.qs, b.qh);
  store_block(b, p);
}

void decode_q5_1(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ5_1>(p);
  const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
  const uint32_t h = high_bits(b.qh);
  for (int j = 0; j < 32; ++j) y[j] = d * five_bits(b.qs, h, j) + m;
}
void encode_q5_1(const float* x, uint8_t* p) {
  BlockQ5_1 b;
  int codes[32];
  encode_min(x, 31, b.d, b.m, codes);
  put_five_bits(codes, b.qs, b.qh);
  store_block(b, p);
}

void decode_q8_0(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ8_0>(p);
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < 32; ++j) y[j] = d * b.qs[j];
}
void encode_q8_0(const float* x, uint8_t* p) {
  BlockQ8_0 b;
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
  b.d = fp32_to_fp16(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(nearest(x[j] * id));
  store_block(b, p);
}

void decode_iq4_nl(const uint8_t* p, float* y) {
  const auto b = load_block<BlockIq4Nl>(p);
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < 32; ++j) y[j] = d * kIq4NlValues[nibble(b.qs, j)];
}
void encode_iq4_nl(const float* x, uint8_t* p) {
  BlockIq4Nl b;
  // The largest magnitude at level 0 (-127), with its sign flipped.
  const float d = signed_absmax(x, 32) / kIq4NlValues[0], id = d != 0 ? 1.0f / d : 0.0f;
  b.d = fp32_to_fp16(d);
  int codes[32];
  for (int j = 0; j < 32; ++j) codes[j] = iq4_nl_index(x[j] * id);
  put_nibbles(codes, b.qs);
  store_block(b, p);
}

void decode_mxfp4(const uint8_t* p, float* y) {
  const auto b = load_block<BlockMxfp4>(p);
  const float d = kE8m0Half[b.e];  // the table is doubled
  for (int j = 0; j < 32; ++j) y[j] = d * kMxfp4DoubledValues[nibble(b.qs, j)];
}
void encode_mxfp4(const float* x, uint8_t* p) {
  BlockMxfp4 b;
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
  b.e = static_cast<uint8_t>(e);
  const float d = kE8m0Half[e];
  int codes[32];
  for (int j = 0; j < 32; ++j) {
    float err = std::numeric_limits<float>::infinity();
    for (int c = 0; c < 16; ++c) {
      const float diff = std::fabs(x[j] - d * kMxfp4DoubledValues[c]);
      if (diff < err) err = diff, codes[j] = c;
    }
  }
  put_nibbles(codes, b.qs);
  store_block(b, p);
}

// Codes and fields of the 32-value blocks (quant_blocks.h, BlockFields).
void fields_q4_0(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ4_0>(p);
  f.d = b.d;
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(nibble(b.qs, j));
}
void fields_q4_1(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ4_1>(p);
  f.d = b.d, f.m = b.m;
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(nibble(b.qs, j));
}
void fields_q5_0(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ5_0>(p);
  f.d = b.d;
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(five_bits(b.qs, high_bits(b.qh), j));
}
void fields_q5_1(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ5_1>(p);
  f.d = b.d, f.m = b.m;
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(five_bits(b.qs, high_bits(b.qh), j));
}
void fields_iq4_nl(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockIq4Nl>(p);
  f.d = b.d;
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(nibble(b.qs, j));
}

}  // namespace

float signed_absmax(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  return m;
}

int nearest(float v) { return static_cast<int>(std::nearbyint(v)); }

const BlockCodec* block32_codec(GgmlType type) {
  static constexpr BlockCodec q4_0{decode_q4_0, encode_q4_0, fields_q4_0}, q4_1{decode_q4_1, encode_q4_1, fields_q4_1},
      q5_0{decode_q5_0, encode_q5_0, fields_q5_0}, q5_1{decode_q5_1, encode_q5_1, fields_q5_1},
      q8_0{decode_q8_0, encode_q8_0, nullptr}, iq4_nl{decode_iq4_nl, encode_iq4_nl, fields_iq4_nl},
      mxfp4{decode_mxfp4, encode_mxfp4, nullptr};
  switch (type) {
    case GgmlType::Q4_0: return &q4_0;
    case GgmlType::Q4_1: return &q4_1;
    case GgmlType::Q5_0: return &q5_0;
    case GgmlType::Q5_1: return &q5_1;
    case GgmlType::Q8_0: return &q8_0;
    case GgmlType::IQ4_NL: return &iq4_nl;
    case GgmlType::MXFP4: return &mxfp4;
    default: return nullptr;
  }
}

}  // namespace tps
