#include "engine/kernels/matmul.h"

#include "runtime/error.h"

namespace tps {

void quantize_activations(const float* x, int tokens, int64_t cols, BlockQ8_0* out) {
  for (int t = 0; t < tokens; ++t) quantize_row_q8_0(x + t * cols, out + t * (cols / 32), cols);
}

void matmul_rows(const DotKernels& k, const Matrix& w, int64_t row_begin, int64_t row_end,
                 const Activations& x, float* y, int64_t y_stride) {
  const int64_t n = w.cols;
  // One row at a time over rows [first, row_end).
  auto run = [&](auto dot, auto input, int64_t input_stride, int64_t first) {
    for (int64_t r = first; r < row_end; ++r) {
      const uint8_t* row = w.row(r);
      for (int t = 0; t < x.tokens; ++t) y[t * y_stride + r] = dot(row, input + t * input_stride, n);
    }
  };
  // Quantized weights go four rows at a time, then the rest one at a time.
  auto run_x4 = [&](auto dot4, auto dot) {
    int64_t r = row_begin;
    float four[4];
    for (; r + 4 <= row_end; r += 4)
      for (int t = 0; t < x.tokens; ++t) {
        dot4(w.row(r), w.row_bytes, x.q + t * (n / 32), n, four);
        for (int i = 0; i < 4; ++i) y[t * y_stride + r + i] = four[i];
      }
    run(dot, x.q, n / 32, r);
  };
  switch (w.type) {
    case GgmlType::Q8_0: return run_x4(k.q8_0_x4, k.q8_0);
    case GgmlType::MXFP4: return run_x4(k.mxfp4_x4, k.mxfp4);
    case GgmlType::F32: return run(k.f32, x.f, n, row_begin);
    case GgmlType::F16: return run(k.f16, x.f, n, row_begin);
    case GgmlType::BF16: return run(k.bf16, x.f, n, row_begin);
    default: throw InputError(cat("no kernel for weights of type ", type_name(w.type)));
  }
}

}  // namespace tps
