// The reference kernels: plain loops over the packed layout, an integer sum
// per block (or half block), then its coefficients in float.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/layer_math.h"

namespace tps {
namespace {

// A packed block's halves as the kernels apply them: value = a[h] x level
// + b[h] for the values of half h (0: the first 16, 1: the last 16), level
// being the integer the kernels multiply -- Q8_0's value, MXFP4's doubled
// E2M1 (the sum is halved at the end), IQ4's table level, else the code.
struct Halves {
  float a[2], b[2] = {0, 0};
};
float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}
Halves halves(GgmlType type, const uint8_t* s, int g, int lane) {
  auto same = [](float a, float b = 0) { return Halves{{a, a}, {b, b}}; };
  auto split = [&](float d, int a_at, float offset) {  // Q6_K, Q3_K: int8 scales of each half
    const float a0 = d * static_cast<int8_t>(s[a_at + lane]), a1 = d * static_cast<int8_t>(s[a_at + 8 + lane]);
    return Halves{{a0, a1}, {offset * a0, offset * a1}};
  };
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL: return same(f16_at(s + 2 * lane));
    case GgmlType::MXFP4: return same(e8m0_bits_to_fp32(s[lane]));
    case GgmlType::Q4_0: return same(f16_at(s + 2 * lane), -8 * f16_at(s + 2 * lane));
    case GgmlType::Q5_0: return same(f16_at(s + 2 * lane), -16 * f16_at(s + 2 * lane));
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: return same(f16_at(s + 2 * lane), f16_at(s + 2 * g + 2 * lane));
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return same(f16_at(s) * s[4 + lane], -f16_at(s + 2) * s[12 + lane]);
    case GgmlType::Q6_K: return split(f16_at(s), 2, -32);
    case GgmlType::Q3_K: return split(f16_at(s), 2, -4);
    case GgmlType::Q2_K: {
      const float d = f16_at(s), dmin = f16_at(s + 2);
      return Halves{{d * s[4 + lane], d * s[12 + lane]}, {-dmin * s[20 + lane], -dmin * s[28 + lane]}};
    }
    case GgmlType::IQ4_XS: return same(f16_at(s) * static_cast<int8_t>(s[2 + lane]));
    default: return same(0);
  }
}
int level(GgmlType type, int code) {
  switch (type) {
    case GgmlType::MXFP4: return kMxfp4DoubledValues[code];
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: return kIq4NlValues[code];
    default: return code;
  }
}

// Value j's place in a token's activations from its block's value 0.
constexpr std::array<int, 32> kValueOffsets = [] {
  std::array<int, 32> o{};
  for (int j = 0; j < 32; ++j) o[j] = static_cast<int>(activation_position(0, j));
  return o;
}();

// Per block exact integer sums of level x activation (by half), then the
// halves' coefficients in float: the block's product, given in order to
// sums.add(p) after sums.start(row, t), then sums.finish(row, t). The float
// product adds the blocks' in order and applies the format's final scale;
// the fixed one (kernel_set.h, FixedMatmul) rounds each times 2^32 x final x
// scale to an integer and adds them in int64.
template <GgmlType type, typename Sums>
void block_products(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end,
                    const Activations& x, Sums& sums) {
  constexpr PackedFormat f = packed_format(type);
  constexpr bool by_half = type == GgmlType::Q2_K || type == GgmlType::Q3_K || type == GgmlType::Q6_K;
  const int64_t blocks = x.cols / 32;
  // A row's levels and scales, unpacked once for all its tokens.
  std::vector<int32_t> levels(x.cols);
  std::vector<Halves> scales(blocks);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t T = tile_rows(row, rows), r = row % T;
    const uint8_t* tile = w + (row - r) * row_bytes;
    for (int64_t b = 0; b < blocks; ++b) {
      const PackedGroup at = packed_group(type, blocks, T, r, b);
      for (int j = 0; j < 32; ++j) levels[32 * b + j] = level(type, packed_code(f, tile + at.values, at.g, at.lane, j));
      scales[b] = halves(type, tile + at.scales, at.g, at.lane);
    }
    for (int t = 0; t < x.tokens; ++t) {
      const int8_t* q = x.q + t * x.q_stride();
      const float *d = x.d + t * x.d_stride(), *sum = x.sum + t * x.d_stride();
      const float *sum_lo = x.sum_lo + t * x.d_stride(), *sum_hi = x.sum_hi + t * x.d_stride();
      sums.start(t);
      for (int64_t b = 0; b < blocks; ++b) {
        const int8_t* qb = q + activation_position(b, 0);
        int32_t s[2] = {0, 0};  // by half: one loop each keeps the sums in registers
        for (int half = 0; half < 2; ++half)
          for (int j = 16 * half; j < 16 * half + 16; ++j) s[half] += levels[32 * b + j] * qb[kValueOffsets[j]];
        const Halves& h = scales[b];
        sums.add(by_half ? static_cast<float>(s[0]) * d[b] * h.a[0] + static_cast<float>(s[1]) * d[b] * h.a[1] +
                               h.b[0] * sum_lo[b] + h.b[1] * sum_hi[b]
                         : static_cast<float>(s[0] + s[1]) * d[b] * h.a[0] + h.b[0] * sum[b]);
      }
      sums.finish(row - row_begin, t);
    }
  }
}

float final_scale(GgmlType type) { return type == GgmlType::MXFP4 ? 0.5f : 1.0f; }

template <GgmlType kType>
void quantized(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end,
               const Activations& x, float* y, int64_t y_stride) {
  struct {
    float* y;
    int64_t y_stride;
    float acc = 0;
    void start(int) { acc = 0; }
    void add(float p) { acc += p; }
    void finish(int64_t r, int t) { y[t * y_stride + r] = acc * final_scale(kType); }
  } sums{y, y_stride};
  block_products<kType>(w, row_bytes, rows, row_begin, row_end, x, sums);
}
template <size_t... I>
constexpr std::array<KernelSet::QuantizedMatmul, kPackedTypeCount> quantized_kernels(std::index_sequence<I...>) {
  return {quantized<kPackedTypes[I]>...};
}

template <GgmlType kType>
bool fixed(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end, const Activations& x,
           const float* scale, int64_t* y, int64_t y_stride) {
  struct {
    const float* scale;
    int64_t* y;
    int64_t y_stride;
    double m = 0;
    int64_t acc = 0;
    bool ok = true;
    void start(int t) { m = 0x1p32 * final_scale(kType) * (scale ? scale[t] : 1.0f), acc = 0; }
    void add(float p) {
      if (!(std::fabs(p) < 0x1p19f)) ok = false;
      if (ok) acc += std::llrint(static_cast<double>(p) * m);  // nearest, ties to even
    }
    void finish(int64_t r, int t) { y[t * y_stride + r] = acc; }
  } sums{scale, y, y_stride};
  block_products<kType>(w, row_bytes, rows, row_begin, row_end, x, sums);
  return sums.ok;
}
template <size_t... I>
constexpr std::array<KernelSet::FixedMatmul, kPackedTypeCount> fixed_kernels(std::index_sequence<I...>) {
  return {fixed<kPackedTypes[I]>...};
}

template <typename Load>
float float_dot(const uint8_t* w, const float* x, int64_t n, size_t elem, Load load) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += load(w + i * elem) * x[i];
  return sum;
}

float f32(const uint8_t* w, const float* x, int64_t n) {
  return float_dot(w, x, n, 4, [](const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  });
}
float f16(const uint8_t* w, const float* x, int64_t n) {
  return float_dot(w, x, n, 2, [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
  });
}
float bf16(const uint8_t* w, const float* x, int64_t n) {
  return float_dot(w, x, n, 2, [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bf16_to_fp32(h);
  });
}

void swiglu(const float* gate, const float* up, const float* gate_bias, const float* up_bias, int64_t n, float alpha,
            float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu_oai(gate[i] + gate_bias[i], up[i] + up_bias[i], alpha, limit);
}

// One query head as the key type scores it: its floats, and for quantized
// keys its codes and scales by blocks of 32 dimensions (kv_format.h).
template <KvType T>
struct Query {
  const float* x;
  int8_t code[kMaxHeadDim];
  float scale[kMaxHeadDim / kKvScaleBlock];
  Query(const float* q, int head_dim) : x(q) {
    if constexpr (kv_quantized(T))
      for (int b = 0; b * kKvScaleBlock < head_dim; ++b) {
        const int i0 = b * kKvScaleBlock;
        scale[b] = query_codes(q + i0, std::min(kKvScaleBlock, head_dim - i0), code + i0);
      }
  }
};

// q . the key at lane j of a key block, the products added in dimension
// order; for quantized keys by blocks of 32 dimensions, each block's
// integer sum of code products (q4_0's key codes less 8) times the key's
// scale times the query's, multiplied and added in one rounding as the
// vector sets' multiply-adds do: the same bits.
template <KvType T>
float key_dot(const Query<T>& q, const uint8_t* kb, int head_dim, int j) {
  float dot = 0;
  if constexpr (kv_quantized(T)) {
    for (int b = 0; b * kKvScaleBlock < head_dim; ++b) {
      int32_t block = 0;
      for (int i = b * kKvScaleBlock; i < std::min(head_dim, (b + 1) * kKvScaleBlock); ++i)
        block += q.code[i] * static_cast<int32_t>(key_code(T, kb, i, j));
      dot = std::fma(static_cast<float>(block), key_scale(T, kb, head_dim, b * kKvScaleBlock, j) * q.scale[b], dot);
    }
  } else {
    for (int i = 0; i < head_dim; ++i) dot += q.x[i] * key_at(T, kb, head_dim, i, j);
  }
  return dot;
}

// The plain loop of the online softmax: per head the block's scores, the
// new max, the old state scaled to it, then each position's weight and
// values added in position order.
template <KvType T>
void attend_block(const float* q, int heads, int head_dim, const uint8_t* kb, const uint8_t* const* v, float scale,
                  int first, int count, float* max, float* sum, float* acc) {
  for (int h = 0; h < heads; ++h) {
    const Query<T> query(q + h * head_dim, head_dim);
    float w[kKeyBlock];
    float m = max[h];
    for (int j = 0; j < count; ++j) m = std::max(m, w[j] = key_dot<T>(query, kb, head_dim, first + j) * scale);
    const float old = std::exp(max[h] - m);  // 0 for a state of no positions
    float total = sum[h] * old;
    for (int j = 0; j < count; ++j) total += w[j] = std::exp(w[j] - m);
    max[h] = m, sum[h] = total;
    for (int i = 0; i < head_dim; ++i) {
      float a = acc[h * head_dim + i] * old;
      for (int j = 0; j < count; ++j) a += w[j] * value_at(T, v[j], head_dim, i);
      acc[h * head_dim + i] = a;
    }
  }
}

// A run a key block at a time: its lanes [first, first + count) of the
// blocks kb[0], kb[1], ...
template <KvType T>
void attend_run(const float* q, int heads, int head_dim, const uint8_t* const* kb, const uint8_t* const* v, float scale,
                int first, int count, float* max, float* sum, float* acc) {
  for (int b = 0, p = first; p < first + count; ++b) {
    const int lane = p - b * kKeyBlock, take = std::min(kKeyBlock - lane, first + count - p);
    attend_block<T>(q, heads, head_dim, kb[b], v + (p - first), scale, lane, take, max, sum, acc);
    p += take;
  }
}

// The reference for a tile: attend_run for each token alone.
template <KvType T>
void attend_tile(const float* const* q, int tokens, int heads, int head_dim, const uint8_t* const* kb,
                 const uint8_t* const* v, float scale, int first, int count, const AttentionState* states) {
  for (int t = 0; t < tokens; ++t)
    attend_run<T>(q[t], heads, head_dim, kb, v, scale, first, count, states[t].max, states[t].sum, states[t].acc);
}

}  // namespace

const KernelSet kScalarKernels{Isa::scalar,
                               quantized_kernels(std::make_index_sequence<kPackedTypeCount>()),
                               fixed_kernels(std::make_index_sequence<kPackedTypeCount>()),
                               f32,
                               f16,
                               bf16,
                               swiglu,
                               {attend_run<KvType::f32>, attend_run<KvType::f16>, attend_run<KvType::bf16>,
                                attend_run<KvType::q8_0>, attend_run<KvType::q4_0>},
                               {attend_tile<KvType::f32>, attend_tile<KvType::f16>, attend_tile<KvType::bf16>,
                                attend_tile<KvType::q8_0>, attend_tile<KvType::q4_0>}};

}  // namespace tps
