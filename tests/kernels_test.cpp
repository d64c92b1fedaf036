// Every dot-product kernel of every instruction set this CPU runs, against
// the scalar reference, on random rows of several lengths, including rows
// that end in a partial vector and blocks with tiny (denormal F16) scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/kernels/dot.h"
#include "engine/kernels/matmul.h"

namespace tps {
namespace {

struct Rows {
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<BlockQ8_0> xq;
};

// Random weights of a type and random activations, some blocks scaled down
// to denormal F16 range.
Rows random_rows(GgmlType type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Rows r;
  std::vector<float> wf(n);
  for (int64_t i = 0; i < n; ++i) wf[i] = normal(rng) * ((i / 32) % 5 == 3 ? 1e-6f : 1.0f);
  r.x.resize(n);
  for (int64_t i = 0; i < n; ++i) r.x[i] = normal(rng) * ((i / 32) % 7 == 2 ? 1e-7f : 1.0f);
  r.w.resize(row_bytes(type, n));
  switch (type) {
    case GgmlType::Q8_0: quantize_row_q8_0(wf.data(), reinterpret_cast<BlockQ8_0*>(r.w.data()), n); break;
    case GgmlType::MXFP4: quantize_row_mxfp4(wf.data(), reinterpret_cast<BlockMxfp4*>(r.w.data()), n); break;
    case GgmlType::F32: std::memcpy(r.w.data(), wf.data(), 4 * n); break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = fp32_to_fp16(wf[i]);
        std::memcpy(r.w.data() + 2 * i, &h, 2);
      }
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = fp32_to_bf16(wf[i]);
        std::memcpy(r.w.data() + 2 * i, &h, 2);
      }
      break;
    default: break;
  }
  if (n % 32 == 0) {
    r.xq.resize(n / 32);
    quantize_row_q8_0(r.x.data(), r.xq.data(), n);
  }
  return r;
}

float run(const DotKernels& k, GgmlType type, const Rows& r, int64_t n) {
  switch (type) {
    case GgmlType::Q8_0: return k.q8_0(r.w.data(), r.xq.data(), n);
    case GgmlType::MXFP4: return k.mxfp4(r.w.data(), r.xq.data(), n);
    case GgmlType::F32: return k.f32(r.w.data(), r.x.data(), n);
    case GgmlType::F16: return k.f16(r.w.data(), r.x.data(), n);
    default: return k.bf16(r.w.data(), r.x.data(), n);
  }
}

// The sum of |w_i x_i|: the scale against which rounding error is judged.
double magnitude(GgmlType type, const Rows& r, int64_t n) {
  std::vector<float> w(n), x(n);
  dequantize_row(type, r.w.data(), w.data(), n);
  if (r.xq.empty()) x = r.x;
  else dequantize_row(GgmlType::Q8_0, reinterpret_cast<const uint8_t*>(r.xq.data()), x.data(), n);
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m += std::fabs(double(w[i]) * x[i]);
  return m;
}

TEST(Kernels, EveryIsaMatchesTheScalarReference) {
  const std::vector<Isa> isas = supported_isas();
  std::printf("instruction sets tested: ");
  for (Isa isa : isas) std::printf("%s ", isa_name(isa));
  std::printf("\n");
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    const bool quantized = type == GgmlType::Q8_0 || type == GgmlType::MXFP4;
    std::vector<int64_t> lengths = quantized ? std::vector<int64_t>{32, 64, 96, 2880, 4096}
                                             : std::vector<int64_t>{1, 7, 8, 15, 16, 33, 2880, 4099};
    for (int64_t n : lengths) {
      for (uint32_t seed = 0; seed < 5; ++seed) {
        Rows r = random_rows(type, n, seed * 131 + static_cast<uint32_t>(n));
        const float want = run(kDotScalar, type, r, n);
        const double scale = magnitude(type, r, n);
        // Products are exact (integer sums) or the same floats; only the
        // order of float additions differs: a few ulps of the magnitude.
        const double tol = 1e-5 * scale + 1e-30;
        for (Isa isa : isas) {
          const float got = run(dot_kernels(isa), type, r, n);
          EXPECT_NEAR(got, want, tol) << type_name(type) << " n=" << n << " seed=" << seed
                                      << " isa=" << isa_name(isa);
        }
      }
    }
  }
}

TEST(Kernels, FourRowKernelsMatchTheReference) {
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::MXFP4}) {
    for (int64_t n : {32, 96, 2880}) {
      std::vector<uint8_t> w;
      for (int r = 0; r < 4; ++r) {
        Rows one = random_rows(type, n, 300 + r + static_cast<uint32_t>(n));
        w.insert(w.end(), one.w.begin(), one.w.end());
      }
      Rows x = random_rows(type, n, 7);
      const uint64_t rb = row_bytes(type, n);
      float want[4], got[4];
      auto four = [&](const DotKernels& k, float* out) {
        (type == GgmlType::Q8_0 ? k.q8_0_x4 : k.mxfp4_x4)(w.data(), rb, x.xq.data(), n, out);
      };
      four(kDotScalar, want);
      for (int r = 0; r < 4; ++r) {
        const uint8_t* row = w.data() + r * rb;
        EXPECT_EQ(want[r], (type == GgmlType::Q8_0 ? kDotScalar.q8_0 : kDotScalar.mxfp4)(
                               row, x.xq.data(), n));
      }
      for (Isa isa : supported_isas()) {
        four(dot_kernels(isa), got);
        for (int r = 0; r < 4; ++r) {
          // Bit-identical to the same ISA's single-row kernel.
          const auto& k = dot_kernels(isa);
          EXPECT_EQ(got[r], (type == GgmlType::Q8_0 ? k.q8_0 : k.mxfp4)(w.data() + r * rb,
                                                                       x.xq.data(), n));
          Rows single;
          single.w.assign(w.begin() + r * rb, w.begin() + (r + 1) * rb);
          single.xq = x.xq;
          EXPECT_NEAR(got[r], want[r], 1e-5 * magnitude(type, single, n) + 1e-30)
              << type_name(type) << " n=" << n << " row " << r << " " << isa_name(isa);
        }
      }
    }
  }
}

TEST(Kernels, MatmulRowsMatchesDotPerToken) {
  const int64_t rows = 5, cols = 64;
  std::vector<uint8_t> w;
  std::vector<float> x;
  for (int r = 0; r < rows; ++r) {
    Rows one = random_rows(GgmlType::Q8_0, cols, 100 + r);
    w.insert(w.end(), one.w.begin(), one.w.end());
  }
  for (int t = 0; t < 3; ++t) {
    Rows one = random_rows(GgmlType::F32, cols, 200 + t);
    x.insert(x.end(), one.x.begin(), one.x.end());
  }
  std::vector<BlockQ8_0> xq(3 * cols / 32);
  quantize_activations(x.data(), 3, cols, xq.data());
  Matrix m{GgmlType::Q8_0, rows, cols, w.data(), row_bytes(GgmlType::Q8_0, cols)};
  std::vector<float> y(3 * rows, -1);
  matmul_rows(kDotScalar, m, 1, 4, Activations{x.data(), xq.data(), cols, 3}, y.data(), rows);
  for (int t = 0; t < 3; ++t)
    for (int r = 0; r < rows; ++r) {
      float want = r >= 1 && r < 4 ? kDotScalar.q8_0(m.row(r), xq.data() + t * 2, cols) : -1;
      EXPECT_EQ(y[t * rows + r], want) << t << "," << r;
    }
}

}  // namespace
}  // namespace tps
