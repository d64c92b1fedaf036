// The 256-element block formats (K-quants and IQ4_XS, quant_blocks.h),
// decoded and encoded one super-block at a time. The encoders round to
// nearest at both levels: each sub-block's scale (and min) from its own
// values, the super-block's F16 scales from the largest of those, then
// each sub-block's integer scale and each value's code with the scales as
// stored.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/gguf/block_codecs.h"
#include "engine/gguf/quant_blocks.h"

namespace tps {
namespace {

// Where the 2-bit field of element e sits in Q2_K/Q3_K's qs: byte
// 32 (e / 128) + e % 32, bits 2 ((e / 32) % 4).
int two_bit_byte(int e) { return 32 * (e / 128) + e % 32; }
int two_bit_shift(int e) { return 2 * ((e / 32) % 4); }

// Asymmetric sub-blocks (Q2_K, Q4_K, Q5_K): value = d * scale * q - dmin *
// min, q in [0, top], scale and min integer codes in [0, code_top]. Each
// sub-block of n values spans [min(0, lo), hi] in top steps; the codes
// are taken with the F16 d and dmin as stored.
struct AsymmetricCodes {
  uint16_t d, dmin;
  int scale[16], min[16];
  int q[256];
};
AsymmetricCodes encode_asymmetric(const float* x, int n, int top, int code_top) {
  const int subs = 256 / n;
  float step[16], offset[16];
  for (int s = 0; s < subs; ++s) {
    const float* v = x + s * n;
    const float lo = std::min(0.0f, *std::min_element(v, v + n)), hi = *std::max_element(v, v + n);
    step[s] = (hi - lo) / top, offset[s] = -lo;
  }
  AsymmetricCodes c;
  const float max_step = *std::max_element(step, step + subs), max_offset = *std::max_element(offset, offset + subs);
  c.d = fp32_to_fp16(max_step / code_top), c.dmin = fp32_to_fp16(max_offset / code_top);
  const float d = fp16_to_fp32(c.d), dmin = fp16_to_fp32(c.dmin);
  for (int s = 0; s < subs; ++s) {
    c.scale[s] = d > 0 ? std::min(code_top, nearest(step[s] / d)) : 0;
    c.min[s] = dmin > 0 ? std::min(code_top, nearest(offset[s] / dmin)) : 0;
    const float sd = d * c.scale[s], sm = dmin * c.min[s];
    for (int i = 0; i < n; ++i) c.q[s * n + i] = sd > 0 ? std::clamp(nearest((x[s * n + i] + sm) / sd), 0, top) : 0;
  }
  return c;
}

// Symmetric sub-blocks (Q3_K, Q6_K, IQ4_XS): value = d * scale * level(q).
// Sub-block s's own scale puts its largest magnitude at level `extreme`;
// the super-block's d puts the largest of those at scale code `code_extreme`.
struct SymmetricScales {
  uint16_t d;
  int scale[16];
};
SymmetricScales symmetric_scales(const float* x, int n, float extreme, float code_extreme, int code_lo, int code_hi) {
  const int subs = 256 / n;
  float own[16];
  for (int s = 0; s < subs; ++s) own[s] = signed_absmax(x + s * n, n) / extreme;
  SymmetricScales c;
  c.d = fp32_to_fp16(signed_absmax(own, subs) / code_extreme);
  const float d = fp16_to_fp32(c.d);
  for (int s = 0; s < subs; ++s) c.scale[s] = d != 0 ? std::clamp(nearest(own[s] / d), code_lo, code_hi) : 0;
  return c;
}

void decode_q2_k(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ2_K>(p);
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int e = 0; e < 256; ++e) {
    const int q = (b.qs[two_bit_byte(e)] >> two_bit_shift(e)) & 3;
    const uint8_t sm = b.scales[e / 16];
    y[e] = d * (sm & 0x0F) * q - dmin * (sm >> 4);
  }
}
void encode_q2_k(const float* x, uint8_t* p) {
  const AsymmetricCodes c = encode_asymmetric(x, 16, 3, 15);
  BlockQ2_K b{};
  b.d = c.d, b.dmin = c.dmin;
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(c.scale[s] | c.min[s] << 4);
  for (int e = 0; e < 256; ++e) b.qs[two_bit_byte(e)] |= static_cast<uint8_t>(c.q[e] << two_bit_shift(e));
  store_block(b, p);
}

void decode_q3_k(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ3_K>(p);
  const float d = fp16_to_fp32(b.d);
  for (int e = 0; e < 256; ++e) {
    const int low = (b.qs[two_bit_byte(e)] >> two_bit_shift(e)) & 3;
    const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
    y[e] = d * q3_k_scale(b.scales, e / 16) * (low - (high ? 0 : 4));
  }
}
void encode_q3_k(const float* x, uint8_t* p) {
  const SymmetricScales sc = symmetric_scales(x, 16, -4, -32, -32, 31);
  BlockQ3_K b{};
  b.d = sc.d;
  const float d = fp16_to_fp32(sc.d);
  for (int s = 0; s < 16; ++s) {
    const int code = sc.scale[s] + 32;
    if (s < 8)
      b.scales[s] |= static_cast<uint8_t>(code & 0x0F);
    else
      b.scales[s - 8] |= static_cast<uint8_t>((code & 0x0F) << 4);
    b.scales[8 + s % 4] |= static_cast<uint8_t>((code >> 4) << (2 * (s / 4)));
  }
  for (int e = 0; e < 256; ++e) {
    const float step = d * sc.scale[e / 16];
    const int q = step != 0 ? std::clamp(nearest(x[e] / step), -4, 3) : 0;
    const int stored = q + 4;  // 0..7: the 2 low bits, and bit 2 set meaning "no -4"
    b.qs[two_bit_byte(e)] |= static_cast<uint8_t>((stored & 3) << two_bit_shift(e));
    if (stored > 3) b.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
  }
  store_block(b, p);
}

// Q4_K/Q5_K: the nibble of element e in qs[32 (e / 64) + e % 32], low for
// (e / 32) even.
int k4_nibble(const uint8_t* qs, int e) {
  const uint8_t byte = qs[32 * (e / 64) + e % 32];
  return (e / 32) % 2 ? byte >> 4 : byte & 0x0F;
}
void put_k4_scales(const AsymmetricCodes& c, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int sc = c.scale[j], mn = c.min[j];
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(sc), scales[j + 4] = static_cast<uint8_t>(mn);
    } else {
      scales[j + 4] = static_cast<uint8_t>((sc & 0x0F) | (mn & 0x0F) << 4);
      scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((mn >> 4) << 6);
    }
  }
}

void decode_q4_k(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ4_K>(p);
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int e = 0; e < 256; ++e) {
    const ScaleMin sm = k4_scale_min(b.scales, e / 32);
    y[e] = d * sm.scale * k4_nibble(b.qs, e) - dmin * sm.min;
  }
}
void encode_q4_k(const float* x, uint8_t* p) {
  const AsymmetricCodes c = encode_asymmetric(x, 32, 15, 63);
  BlockQ4_K b{};
  b.d = c.d, b.dmin = c.dmin;
  put_k4_scales(c, b.scales);
  for (int e = 0; e < 256; ++e) b.qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(c.q[e] << 4 * ((e / 32) % 2));
  store_block(b, p);
}

void decode_q5_k(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ5_K>(p);
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int e = 0; e < 256; ++e) {
    const ScaleMin sm = k4_scale_min(b.scales, e / 32);
    const int q = k4_nibble(b.qs, e) | ((b.qh[e % 32] >> (e / 32)) & 1) << 4;
    y[e] = d * sm.scale * q - dmin * sm.min;
  }
}
void encode_q5_k(const float* x, uint8_t* p) {
  const AsymmetricCodes c = encode_asymmetric(x, 32, 31, 63);
  BlockQ5_K b{};
  b.d = c.d, b.dmin = c.dmin;
  put_k4_scales(c, b.scales);
  for (int e = 0; e < 256; ++e) {
    b.qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>((c.q[e] & 0x0F) << 4 * ((e / 32) % 2));
    b.qh[e % 32] |= static_cast<uint8_t>((c.q[e] >> 4) << (e / 32));
  }
  store_block(b, p);
}

// Q6_K: element e's low nibble and high bits (quant_blocks.h).
struct Q6Place {
  int ql, ql_shift, qh, qh_shift;
};
Q6Place q6_place(int e) {
  const int h = e / 128, k = (e / 32) % 4, l = e % 32;
  return {64 * h + 32 * (k % 2) + l, k < 2 ? 0 : 4, 32 * h + l, 2 * k};
}

void decode_q6_k(const uint8_t* p, float* y) {
  const auto b = load_block<BlockQ6_K>(p);
  const float d = fp16_to_fp32(b.d);
  for (int e = 0; e < 256; ++e) {
    const Q6Place at = q6_place(e);
    const int q = ((b.ql[at.ql] >> at.ql_shift) & 0x0F) | ((b.qh[at.qh] >> at.qh_shift) & 3) << 4;
    y[e] = d * b.scales[e / 16] * (q - 32);
  }
}
void encode_q6_k(const float* x, uint8_t* p) {
  const SymmetricScales sc = symmetric_scales(x, 16, -32, -128, -128, 127);
  BlockQ6_K b{};
  b.d = sc.d;
  const float d = fp16_to_fp32(sc.d);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(sc.scale[s]);
  for (int e = 0; e < 256; ++e) {
    const float step = d * sc.scale[e / 16];
    const int q = (step != 0 ? std::clamp(nearest(x[e] / step), -32, 31) : 0) + 32;
    const Q6Place at = q6_place(e);
    b.ql[at.ql] |= static_cast<uint8_t>((q & 0x0F) << at.ql_shift);
    b.qh[at.qh] |= static_cast<uint8_t>((q >> 4) << at.qh_shift);
  }
  store_block(b, p);
}

void decode_iq4_xs(const uint8_t* p, float* y) {
  const auto b = load_block<BlockIq4Xs>(p);
  const float d = fp16_to_fp32(b.d);
  for (int s = 0; s < 8; ++s) {
    const float ds = d * iq4_xs_scale(b, s);
    for (int t = 0; t < 16; ++t) {
      y[32 * s + t] = ds * kIq4NlValues[b.qs[16 * s + t] & 0x0F];
      y[32 * s + 16 + t] = ds * kIq4NlValues[b.qs[16 * s + t] >> 4];
    }
  }
}
void encode_iq4_xs(const float* x, uint8_t* p) {
  const SymmetricScales sc = symmetric_scales(x, 32, kIq4NlValues[0], -32, -32, 31);
  BlockIq4Xs b{};
  b.d = sc.d;
  const float d = fp16_to_fp32(sc.d);
  for (int s = 0; s < 8; ++s) {
    const int code = sc.scale[s] + 32;
    b.scales_l[s / 2] |= static_cast<uint8_t>((code & 0x0F) << 4 * (s % 2));
    b.scales_h |= static_cast<uint16_t>((code >> 4) << (2 * s));
    const float step = d * sc.scale[s];
    for (int i = 0; i < 32; ++i) {
      int best = 0;
      float err = std::numeric_limits<float>::infinity();
      for (int c = 0; c < 16; ++c) {
        const float diff = std::fabs(x[32 * s + i] - step * kIq4NlValues[c]);
        if (diff < err) err = diff, best = c;
      }
      b.qs[16 * s + i % 16] |= static_cast<uint8_t>(best << 4 * (i / 16));
    }
  }
  store_block(b, p);
}

// Codes and fields of the super-blocks (quant_blocks.h, BlockFields).
void fields_q2_k(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ2_K>(p);
  f.d = b.d, f.m = b.dmin;
  for (int s = 0; s < 16; ++s)
    f.scale[s] = static_cast<int8_t>(b.scales[s] & 0x0F), f.min[s] = static_cast<int8_t>(b.scales[s] >> 4);
  for (int e = 0; e < 256; ++e) codes[e] = static_cast<uint8_t>((b.qs[two_bit_byte(e)] >> two_bit_shift(e)) & 3);
}
void fields_q3_k(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ3_K>(p);
  f.d = b.d;
  for (int s = 0; s < 16; ++s) f.scale[s] = static_cast<int8_t>(q3_k_scale(b.scales, s));
  for (int e = 0; e < 256; ++e) {
    const int low = (b.qs[two_bit_byte(e)] >> two_bit_shift(e)) & 3, high = (b.hmask[e % 32] >> (e / 32)) & 1;
    codes[e] = static_cast<uint8_t>(low | high << 2);
  }
}
// Q4_K's and Q5_K's d, dmin and 6-bit scales and mins.
template <typename Block>
void k4_fields(const Block& b, BlockFields& f) {
  f.d = b.d, f.m = b.dmin;
  for (int s = 0; s < 8; ++s) {
    const ScaleMin sm = k4_scale_min(b.scales, s);
    f.scale[s] = static_cast<int8_t>(sm.scale), f.min[s] = static_cast<int8_t>(sm.min);
  }
}
void fields_q4_k(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ4_K>(p);
  k4_fields(b, f);
  for (int e = 0; e < 256; ++e) codes[e] = static_cast<uint8_t>(k4_nibble(b.qs, e));
}
void fields_q5_k(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ5_K>(p);
  k4_fields(b, f);
  for (int e = 0; e < 256; ++e)
    codes[e] = static_cast<uint8_t>(k4_nibble(b.qs, e) | ((b.qh[e % 32] >> (e / 32)) & 1) << 4);
}
void fields_q6_k(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockQ6_K>(p);
  f.d = b.d;
  for (int s = 0; s < 16; ++s) f.scale[s] = b.scales[s];
  for (int e = 0; e < 256; ++e) {
    const Q6Place at = q6_place(e);
    codes[e] = static_cast<uint8_t>(((b.ql[at.ql] >> at.ql_shift) & 0x0F) | ((b.qh[at.qh] >> at.qh_shift) & 3) << 4);
  }
}
void fields_iq4_xs(const uint8_t* p, uint8_t* codes, BlockFields& f) {
  const auto b = load_block<BlockIq4Xs>(p);
  f.d = b.d;
  for (int s = 0; s < 8; ++s) {
    f.scale[s] = static_cast<int8_t>(iq4_xs_scale(b, s));
    for (int t = 0; t < 16; ++t) {
      codes[32 * s + t] = static_cast<uint8_t>(b.qs[16 * s + t] & 0x0F);
      codes[32 * s + 16 + t] = static_cast<uint8_t>(b.qs[16 * s + t] >> 4);
    }
  }
}

}  // namespace

const BlockCodec* block256_codec(GgmlType type) {
  static constexpr BlockCodec q2_k{decode_q2_k, encode_q2_k, fields_q2_k}, q3_k{decode_q3_k, encode_q3_k, fields_q3_k},
      q4_k{decode_q4_k, encode_q4_k, fields_q4_k}, q5_k{decode_q5_k, encode_q5_k, fields_q5_k},
      q6_k{decode_q6_k, encode_q6_k, fields_q6_k}, iq4_xs{decode_iq4_xs, encode_iq4_xs, fields_iq4_xs};
  switch (type) {
    case GgmlType::Q2_K: return &q2_k;
    case GgmlType::Q3_K: return &q3_k;
    case GgmlType::Q4_K: return &q4_k;
    case GgmlType::Q5_K: return &q5_k;
    case GgmlType::Q6_K: return &q6_k;
    case GgmlType::IQ4_XS: return &iq4_xs;
    default: return nullptr;
  }
}

}  // namespace tps
