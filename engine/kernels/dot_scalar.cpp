// The reference dot products: plain loops, integer sums per block exactly as
// the vector versions form them, one float multiply-add per block.
#include <cstring>

#include "engine/kernels/dot.h"

namespace tps {
namespace {

float q8_0(const uint8_t* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    BlockQ8_0 wb;
    std::memcpy(&wb, w + b * sizeof wb, sizeof wb);
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += wb.qs[j] * x[b].qs[j];
    sum += fp16_to_fp32(wb.d) * fp16_to_fp32(x[b].d) * static_cast<float>(s);
  }
  return sum;
}

float mxfp4(const uint8_t* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* wb = w + b * sizeof(BlockMxfp4);
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) {
      s += kMxfp4DoubledValues[wb[1 + j] & 0x0F] * x[b].qs[j];
      s += kMxfp4DoubledValues[wb[1 + j] >> 4] * x[b].qs[j + 16];
    }
    // The table is doubled: scale by 2^(e - 128).
    sum += kE8m0Half[wb[0]] * fp16_to_fp32(x[b].d) * static_cast<float>(s);
  }
  return sum;
}

// The reference for four rows is four single rows.
template <float (*Dot)(const uint8_t*, const BlockQ8_0*, int64_t)>
void four_rows(const uint8_t* w, uint64_t row_bytes, const BlockQ8_0* x, int64_t n, float* out) {
  for (int r = 0; r < 4; ++r) out[r] = Dot(w + r * row_bytes, x, n);
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

}  // namespace

const DotKernels kDotScalar{Isa::scalar, q8_0, mxfp4, four_rows<q8_0>, four_rows<mxfp4>,
                            f32, f16, bf16};

}  // namespace tps
