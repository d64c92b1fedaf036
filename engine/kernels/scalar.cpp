// The reference kernels: plain loops over the packed layout, an integer sum
// per block, one float multiply-add per block.
#include <cstring>
#include <span>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/layer_math.h"

namespace tps {
namespace {

// Value j of block b of row r of a tile of T packed rows, and the block's
// scale, as the formats of kernels/packed_rows.h store them.
struct Q8_0Row {
  static constexpr GgmlType kType = GgmlType::Q8_0;
  static constexpr float kFinalScale = 1.0f;
  static int value(const uint8_t* tile, int64_t blocks, int64_t T, int64_t r, int64_t b, int j) {
    return static_cast<int8_t>(tile[packed_value_offset(kType, blocks, T, r, b, j)]);
  }
  static float scale(const uint8_t* tile, int64_t blocks, int64_t T, int64_t r, int64_t b) {
    uint16_t h;
    std::memcpy(&h, tile + packed_scale_offset(kType, blocks, T, r, b), 2);
    return fp16_to_fp32(h);
  }
};

struct Mxfp4Row {
  static constexpr GgmlType kType = GgmlType::MXFP4;
  static constexpr float kFinalScale = 0.5f;  // the value table is doubled
  static int value(const uint8_t* tile, int64_t blocks, int64_t T, int64_t r, int64_t b, int j) {
    const uint8_t byte = tile[packed_value_offset(kType, blocks, T, r, b, j)];
    return kMxfp4DoubledValues[j < 16 ? byte & 0x0F : byte >> 4];
  }
  static float scale(const uint8_t* tile, int64_t blocks, int64_t T, int64_t r, int64_t b) {
    return e8m0_bits_to_fp32(tile[packed_scale_offset(kType, blocks, T, r, b)]);
  }
};

// Per block an exact integer sum, then one float multiply-add; the sum of
// blocks in order, times the format's final scale.
template <typename Row>
void quantized_matmul(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end,
                      const Activations& x, float* y, int64_t y_stride) {
  const int64_t blocks = x.cols / 32;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t T = tile_rows(row, rows), r = row % T;
    const uint8_t* tile = w + (row - r) * row_bytes;
    for (int t = 0; t < x.tokens; ++t) {
      const int8_t* q = x.q + t * x.q_stride();
      const float* d = x.d + t * x.d_stride();
      float sum = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t s = 0;
        for (int j = 0; j < 32; ++j) s += Row::value(tile, blocks, T, r, b, j) * q[activation_position(b, j)];
        sum += static_cast<float>(s) * d[b] * Row::scale(tile, blocks, T, r, b);
      }
      y[t * y_stride + row - row_begin] = sum * Row::kFinalScale;
    }
  }
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

void score_keys(const float* q, int heads, int head_dim, const float* kb, float scale, int first, int count,
                float* scores, int64_t stride) {
  for (int h = 0; h < heads; ++h)
    for (int j = first; j < first + count; ++j) {
      float dot = 0;
      for (int i = 0; i < head_dim; ++i) dot += q[h * head_dim + i] * kb[i * kKeyBlock + j];
      scores[h * stride + j - first] = dot * scale;
    }
}

void softmax_sink(float* z, int n, float sink) { softmax_with_sink(std::span<float>(z, static_cast<size_t>(n)), sink); }

void add_values(const float* p, int64_t stride, int heads, const float* const* v, int n, int head_dim, float* out) {
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < head_dim; ++i) {
      float acc = out[h * head_dim + i];
      for (int s = 0; s < n; ++s) acc += p[h * stride + s] * v[s][i];
      out[h * head_dim + i] = acc;
    }
}

}  // namespace

const KernelSet kScalarKernels{Isa::scalar,
                               quantized_matmul<Q8_0Row>,
                               quantized_matmul<Mxfp4Row>,
                               f32,
                               f16,
                               bf16,
                               swiglu,
                               score_keys,
                               softmax_sink,
                               add_values};

}  // namespace tps
