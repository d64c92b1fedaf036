#include "engine/kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/error.h"

namespace tps {

void QuantizedActivations::quantize(const float* x, int tokens, int64_t cols) {
  resize(tokens, cols);
  quantize_rows(x, 0, tokens);
}

void QuantizedActivations::resize(int tokens, int64_t cols) {
  cols_ = cols;
  const Activations shape{.cols = cols};
  q_.resize(tokens * shape.q_stride()), u_.resize(tokens * shape.q_stride());
  for (auto* plane : {&d_, &offset_, &sum_, &sum_lo_, &sum_hi_}) plane->resize(tokens * shape.d_stride());
}

uint64_t QuantizedActivations::bytes_for(int64_t tokens, int64_t cols) {
  const Activations shape{.cols = cols};
  return static_cast<uint64_t>(tokens) * (2 * shape.q_stride() + 5 * shape.d_stride() * sizeof(float));
}

void QuantizedActivations::quantize_rows(const float* x, int first, int count) {
  const int64_t cols = cols_;
  const Activations shape{.cols = cols};
  const int64_t blocks = cols / 32, q_stride = shape.q_stride(), d_stride = shape.d_stride();
  for (int t = first; t < first + count; ++t) {
    int8_t* q = q_.data() + t * q_stride;
    float* d = d_.data() + t * d_stride;
    float* offset = offset_.data() + t * d_stride;
    float *sum = sum_.data() + t * d_stride, *sum_lo = sum_lo_.data() + t * d_stride,
          *sum_hi = sum_hi_.data() + t * d_stride;
    // The lanes of a last group past the row's last block stay zero (their
    // weights are whatever follows a matrix: u's lanes, 128, take nothing
    // from them either, as the Q8_0 kernel's correction takes off exactly
    // 128 x the weights).
    std::fill_n(q + q_stride - 256, 256, int8_t{0});
    for (float* plane : {d, offset, sum, sum_lo, sum_hi}) std::fill_n(plane + d_stride - 8, 8, 0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = x + t * cols + b * 32;
      // The loops below are written for the compiler to vectorize (decode
      // quantizes every product's input on one thread): the maximum in 8
      // lanes, the rounding without a library call.
      float lanes[8] = {};
      for (int j0 = 0; j0 < 32; j0 += 8)
        for (int l = 0; l < 8; ++l) lanes[l] = std::max(lanes[l], std::fabs(v[j0 + l]));
      float amax = 0;
      for (float m : lanes) amax = std::max(amax, m);
      // As ggml's Q8_0 (quantize_row_q8_0): q from the exact scale, the
      // scale kept as F16 -- the rounding llama.cpp and the reference test
      // pass apply (without it tps moved from the reference by a median
      // 0.02 nats on the tiny model).
      const float exact = amax / 127.0f, inv = exact != 0 ? 1.0f / exact : 0.0f;
      const float scale = fp16_to_fp32(fp32_to_fp16(exact));
      // Round to nearest, ties to even (as nearbyint in the default mode):
      // adding and taking off 1.5 x 2^23 leaves an integer for |v| <= 2^22
      // (here |v| <= 127).
      constexpr float kRound = 12582912.0f;
      int8_t values[32];
      for (int j = 0; j < 32; ++j) values[j] = static_cast<int8_t>((v[j] * inv + kRound) - kRound);
      int32_t lo = 0, hi = 0;
      for (int j = 0; j < 16; ++j) lo += values[j], hi += values[j + 16];
      // Quad by quad into the block's lane of its group (kernels/packed_rows.h).
      for (int j = 0; j < 32; j += 4) std::memcpy(q + activation_position(b, j), values + j, 4);
      d[b] = scale;
      offset[b] = 12.0f * scale * static_cast<float>(lo + hi);
      sum[b] = scale * static_cast<float>(lo + hi);
      sum_lo[b] = scale * static_cast<float>(lo), sum_hi[b] = scale * static_cast<float>(hi);
    }
    uint8_t* u = u_.data() + t * q_stride;
    for (int64_t i = 0; i < q_stride; ++i) u[i] = static_cast<uint8_t>(q[i] + 128);
  }
}

Activations QuantizedActivations::view(const float* f, int first, int count) const {
  Activations a{.f = f + first * cols_, .cols = cols_, .tokens = count};
  a.q = q_.data() + first * a.q_stride(), a.u = u_.data() + first * a.q_stride();
  a.d = d_.data() + first * a.d_stride(), a.offset = offset_.data() + first * a.d_stride();
  a.sum = sum_.data() + first * a.d_stride();
  a.sum_lo = sum_lo_.data() + first * a.d_stride(), a.sum_hi = sum_hi_.data() + first * a.d_stride();
  return a;
}

int64_t row_grain(const Matrix& w) {
  constexpr int64_t kPanel = 16, kBytes = 64 << 10;
  if (w.row_bytes == 0) return kPanel;  // a shard's empty matrix
  const int64_t rows = kBytes / static_cast<int64_t>(w.row_bytes);
  return std::max<int64_t>(1, (rows + kPanel - 1) / kPanel) * kPanel;
}

namespace {
// The kernel set's dot product of a row of float weights of this type.
float (*float_dot(const KernelSet& k, GgmlType type))(const uint8_t*, const float*, int64_t) {
  switch (type) {
    case GgmlType::F32: return k.f32;
    case GgmlType::F16: return k.f16;
    case GgmlType::BF16: return k.bf16;
    default: throw InputError(cat("no kernel for weights of type ", type_name(type)));
  }
}
}  // namespace

void matmul_rows(const KernelSet& k, const Matrix& w, int64_t row_begin, int64_t row_end, const Activations& x,
                 float* y, int64_t y_stride) {
  const int64_t n = w.cols;
  auto integer = [&](KernelSet::QuantizedMatmul kernel) {
    if (row_end > row_begin) kernel(w.data, w.row_bytes, w.rows, row_begin, row_end, x, y + row_begin, y_stride);
  };
  auto floats = [&](auto dot) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* row = w.row(r);
      for (int t = 0; t < x.tokens; ++t) y[t * y_stride + r] = dot(row, x.f + t * n, n);
    }
  };
  if (is_packed_type(w.type)) return integer(k.matmul(w.type));
  return floats(float_dot(k, w.type));
}

bool matmul_rows_fixed(const KernelSet& k, const Matrix& w, int64_t row_begin, int64_t row_end, const Activations& x,
                       const float* scale, int64_t* y, int64_t y_stride) {
  if (row_end <= row_begin) return true;
  if (is_packed_type(w.type))
    return k.matmul_fixed(w.type)(w.data, w.row_bytes, w.rows, row_begin, row_end, x, scale, y + row_begin, y_stride);
  // Float rows: the same by 32-value blocks, each block's dot product by
  // the float kernel.
  const auto dot = float_dot(k, w.type);
  const int64_t n = w.cols, elem = w.type == GgmlType::F32 ? 4 : 2;
  bool ok = true;
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int t = 0; t < x.tokens; ++t) {
      const double m = 0x1p32 * (scale ? scale[t] : 1.0f);
      int64_t acc = 0;
      for (int64_t b = 0; b < n; b += 32) {
        const float p = dot(w.row(r) + b * elem, x.f + t * n + b, std::min<int64_t>(32, n - b));
        if (!(std::fabs(p) < 0x1p19f)) ok = false;
        if (ok) acc += std::llrint(static_cast<double>(p) * m);
      }
      y[t * y_stride + r] = acc;
    }
  return ok;
}

}  // namespace tps
