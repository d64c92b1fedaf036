// Matrix products over weight rows, built on the row dot products: for each
// weight row (read once) and each of T tokens, y[t][r] = row . x[t]. The row
// stays in L1 while the T tokens use it, so prefill reads the weights once
// per batch and decode (T = 1) streams them once.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/dot.h"
#include "engine/weights.h"

namespace tps {

// Activations of T tokens: floats [T][cols] and, for Q8_0/MXFP4 weights,
// the same quantized to Q8_0 blocks [T][cols / 32].
struct Activations {
  const float* f = nullptr;
  const BlockQ8_0* q = nullptr;
  int64_t cols = 0;
  int tokens = 0;
};

// Quantizes T rows of cols floats into Q8_0 blocks (the reference quantizer).
void quantize_activations(const float* x, int tokens, int64_t cols, BlockQ8_0* out);

// y[t * y_stride + r] = w.row(r) . x[t] for r in [row_begin, row_end).
void matmul_rows(const DotKernels& k, const Matrix& w, int64_t row_begin, int64_t row_end,
                 const Activations& x, float* y, int64_t y_stride);

}  // namespace tps
