// The kernels: the packed layout and the activation quantizer against plain
// dequantized arithmetic, and every kernel of every instruction set this CPU
// runs against the scalar reference, on random rows of several lengths
// (odd block counts, partial vectors), tiles of any rows x tokens, and
// blocks with tiny (denormal F16) scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/matmul.h"

namespace tps {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed, float tiny_every = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = normal(rng) * (tiny_every > 0 && (i / 32) % 5 == 3 ? tiny_every : 1.0f);
  return v;
}

// `rows` random rows of a type in the file's layout, some blocks scaled down
// to denormal F16 range. MXFP4 codes are random bytes: the quantizer never
// writes nibble 8 (-0), which the kernels' tables must decode all the same.
std::vector<uint8_t> file_rows(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  const uint64_t rb = row_bytes(type, cols);
  std::vector<uint8_t> out(rows * rb);
  std::mt19937 codes(seed);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> f = random_floats(cols, seed + static_cast<uint32_t>(r), 1e-6f);
    uint8_t* dst = out.data() + r * rb;
    quantize_row(type, f.data(), dst, cols);
    if (type == GgmlType::MXFP4)
      for (int64_t b = 0; b < cols / 32; ++b)  // 17-byte blocks: the scale, then 16 bytes of codes
        for (int i = 1; i < 17; ++i) dst[b * 17 + i] = static_cast<uint8_t>(codes());
  }
  return out;
}

// Packed rows, and the bytes after them the kernels may read.
std::vector<uint8_t> packed(GgmlType type, const std::vector<uint8_t>& file, int64_t cols) {
  std::vector<uint8_t> out(file.size() + kPackedOverread);
  const uint64_t rb = row_bytes(type, cols);
  const int64_t rows = static_cast<int64_t>(file.size() / rb);
  out.resize(rows * packed_row_bytes(type, cols) + kPackedOverread);
  pack_rows(type, file.data(), rb, out.data(), rows, cols);
  // NaN scales and extreme values past the matrix: they must not leak in.
  std::fill(out.end() - kPackedOverread, out.end(), uint8_t{0xFF});
  return out;
}

// Token t of quantized activations as floats (q x d), read back through the
// documented layout.
std::vector<float> dequantized(const Activations& x, int t) {
  std::vector<float> out(x.cols);
  for (int64_t i = 0; i < x.cols; ++i) {
    const int64_t b = i / 32;
    const int64_t at = t * x.q_stride() + activation_position(b, static_cast<int>(i % 32));
    out[i] = x.q[at] * x.d[t * x.d_stride() + b];
  }
  return out;
}

TEST(Kernels, QuantizerKeepsEachValueWithinHalfAStepOfItsScale) {
  for (int64_t cols : {32, 96, 1440}) {
    const std::vector<float> x = random_floats(3 * cols, 11, 1e-7f);
    QuantizedActivations qa;
    qa.quantize(x.data(), 3, cols);
    const Activations a = qa.view(x.data(), 0, 3);
    for (int t = 0; t < 3; ++t) {
      const std::vector<float> back = dequantized(a, t);
      // Half a step of the exact scale max|x| / 127, plus what rounding the
      // scale to F16 (11 bits) moves a value by; below F16's normal range
      // the scale may round to 0 and the block with it.
      for (int64_t b = 0; b < cols / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[t * cols + b * 32 + j]));
        const float step = amax / 127;
        const float bound = step >= 6.2e-5f ? step * (0.5f + 127.0f / 2048) * (1 + 1e-6f) : amax;
        for (int j = 0; j < 32; ++j)
          EXPECT_LE(std::fabs(back[b * 32 + j] - x[t * cols + b * 32 + j]), bound) << cols << " " << b;
      }
      // The lanes of a last group past the last block are empty.
      for (int64_t b = cols / 32; b < a.d_stride(); ++b) {
        EXPECT_EQ(a.d[t * a.d_stride() + b], 0.0f);
        EXPECT_EQ(a.offset[t * a.d_stride() + b], 0.0f);
        for (int j = 0; j < 32; ++j) EXPECT_EQ(a.q[t * a.q_stride() + activation_position(b, j)], 0);
      }
    }
  }
}

// Every packed type, at row lengths of a whole group, several, a partial
// last group (odd block counts; lanes past the row's end), gpt-oss's widths.
std::vector<int64_t> test_cols(GgmlType type) {
  if (ggml_type_info(static_cast<uint32_t>(type))->block_elems == 256) return {256, 512, 2816, 4096};
  return {32, 64, 96, 256, 1440, 2880};
}

// Packing plus the scalar kernel equal plain dequantized arithmetic (in
// double) to float rounding: the layout and the kernel's indexing agree with
// the file's format.
TEST(Kernels, ScalarKernelOnPackedRowsMatchesDequantizedArithmetic) {
  for (GgmlType type : kPackedTypes)
    for (int64_t cols : test_cols(type)) {
      const int64_t rows = 6;  // a tile of 4 rows, then 2 of 1
      const int tokens = 2;
      const std::vector<uint8_t> file = file_rows(type, rows, cols, static_cast<uint32_t>(cols));
      const std::vector<uint8_t> w = packed(type, file, cols);
      const std::vector<float> x = random_floats(tokens * cols, 5);
      QuantizedActivations qa;
      qa.quantize(x.data(), tokens, cols);
      const Activations a = qa.view(x.data(), 0, tokens);
      std::vector<float> y(tokens * rows);
      kScalarKernels.matmul(type)(w.data(), packed_row_bytes(type, cols), rows, 0, rows, a, y.data(), rows);
      std::vector<float> wf(cols);
      for (int t = 0; t < tokens; ++t) {
        const std::vector<float> xf = dequantized(a, t);
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(type, file.data() + r * row_bytes(type, cols), wf.data(), cols);
          double want = 0, magnitude = 0;
          for (int64_t i = 0; i < cols; ++i) {
            want += static_cast<double>(wf[i]) * xf[i];
            magnitude += std::fabs(static_cast<double>(wf[i]) * xf[i]);
          }
          EXPECT_NEAR(y[t * rows + r], want, 1e-5 * magnitude + 1e-30)
              << type_name(type) << " cols=" << cols << " row " << r << " token " << t;
        }
      }
    }
}

// Every ISA's integer kernels against the scalar ones, for tiles of any
// shape; and a row's result is the same bits whether it is computed with
// other rows and tokens or alone.
TEST(Kernels, EveryIsaMatchesTheScalarReference) {
  const std::vector<Isa> isas = supported_isas();
  std::printf("instruction sets tested: ");
  for (Isa isa : isas) std::printf("%s ", isa_name(isa));
  std::printf("\n");
  for (GgmlType type : kPackedTypes)
    for (int64_t cols : test_cols(type))
      for (auto [rows, tokens] : {std::pair{1, 1},
                                  {5, 1},
                                  {9, 1},
                                  {3, 2},
                                  {3, 3},
                                  {2, 6},
                                  {2, 7},
                                  {2, 13},
                                  {4, 8},
                                  {7, 5},
                                  {9, 2},
                                  {9, 3},
                                  {8, 16},
                                  {6, 17}}) {
        const uint64_t rb = row_bytes(type, cols);
        const std::vector<uint8_t> file = file_rows(type, rows, cols, 7 * rows + tokens);
        const std::vector<uint8_t> w = packed(type, file, cols);
        const std::vector<float> x = random_floats(tokens * cols, 3 + tokens, 1e-7f);
        QuantizedActivations qa;
        qa.quantize(x.data(), tokens, cols);
        const Activations a = qa.view(x.data(), 0, tokens);
        auto run = [&](const KernelSet& k, int64_t r0, int64_t r1, const Activations& in, float* y, int64_t stride) {
          k.matmul(type)(w.data(), packed_row_bytes(type, cols), rows, r0, r1, in, y, stride);
        };
        std::vector<float> want(tokens * rows), got(tokens * rows);
        run(kScalarKernels, 0, rows, a, want.data(), rows);
        for (Isa isa : isas) {
          const KernelSet& k = kernel_set(isa);
          run(k, 0, rows, a, got.data(), rows);
          for (int t = 0; t < tokens; ++t)
            for (int r = 0; r < rows; ++r) {
              // Only the order of float additions differs: a few ulps of
              // the sum of |w x|.
              const std::vector<float> xf = dequantized(a, t);
              std::vector<float> wf(cols);
              dequantize_row(type, file.data() + r * rb, wf.data(), cols);
              double magnitude = 0;
              for (int64_t i = 0; i < cols; ++i) magnitude += std::fabs(double(wf[i]) * xf[i]);
              const float g = got[t * rows + r];
              EXPECT_NEAR(g, want[t * rows + r], 1e-5 * magnitude + 1e-30)
                  << type_name(type) << " cols=" << cols << " " << rows << "x" << tokens << " row " << r << " token "
                  << t << " isa=" << isa_name(isa);
              float alone;
              run(k, r, r + 1, qa.view(x.data(), t, 1), &alone, 1);
              EXPECT_EQ(alone, g) << "row " << r << " token " << t << " alone, isa=" << isa_name(isa);
            }
          // Rows from inside one tile to inside another: the same bits.
          if (rows > 2) {
            std::vector<float> part(tokens * rows);
            run(k, 1, rows - 1, a, part.data(), rows);
            for (int t = 0; t < tokens; ++t)
              for (int r = 1; r < rows - 1; ++r)
                EXPECT_EQ(part[t * rows + r - 1], got[t * rows + r]) << "rows 1.." << rows - 1 << ", row " << r;
          }
        }
      }
}

// Fixed-point products (matmul_rows_fixed): every ISA against the scalar
// reference, and the property they exist for -- a row cut into two
// matrices at any block (as a split across ranks cuts it), each part packed
// and its activations quantized on their own, gives parts whose int64 sum
// is the whole row's result to the bit.
std::vector<uint8_t> packed_columns(GgmlType type, const std::vector<uint8_t>& file, int64_t rows, int64_t cols,
                                    int64_t begin, int64_t end) {
  const uint64_t rb = row_bytes(type, cols);
  std::vector<uint8_t> out(rows * packed_row_bytes(type, end - begin) + kPackedOverread, 0xFF);
  pack_rows(type, file.data() + row_bytes(type, begin), rb, out.data(), rows, end - begin);
  return out;
}

TEST(Kernels, FixedSumsAreTheSameBitsForAnyCutOfARow) {
  const int64_t rows = 5;
  const int tokens = 3;
  const float scale[tokens] = {1.0f, 0.3125f, 0.0078125f};
  for (Isa isa : supported_isas())
    for (GgmlType type : kPackedTypes)
      for (int64_t cols : test_cols(type)) {
        const int64_t block = ggml_type_info(static_cast<uint32_t>(type))->block_elems;
        const std::vector<uint8_t> file = file_rows(type, rows, cols, static_cast<uint32_t>(3 * cols));
        const std::vector<float> x = random_floats(tokens * cols, 17, 1e-7f);
        auto product = [&](int64_t begin, int64_t end) {
          const std::vector<uint8_t> w = packed_columns(type, file, rows, cols, begin, end);
          std::vector<float> xs(tokens * (end - begin));
          for (int t = 0; t < tokens; ++t)
            std::copy_n(x.data() + t * cols + begin, end - begin, xs.data() + t * (end - begin));
          QuantizedActivations qa;
          qa.quantize(xs.data(), tokens, end - begin);
          const Matrix m{type, rows, end - begin, w.data(), packed_row_bytes(type, end - begin)};
          std::vector<int64_t> y(tokens * rows);
          EXPECT_TRUE(
              matmul_rows_fixed(kernel_set(isa), m, 0, rows, qa.view(xs.data(), 0, tokens), scale, y.data(), rows));
          return y;
        };
        const std::vector<int64_t> whole = product(0, cols);
        for (int64_t cut = block; cut < cols; cut += std::max(block, cols / 7 / block * block)) {
          const std::vector<int64_t> a = product(0, cut), b = product(cut, cols);
          for (int64_t i = 0; i < tokens * rows; ++i)
            ASSERT_EQ(a[i] + b[i], whole[i])
                << type_name(type) << " cols=" << cols << " cut at " << cut << " isa=" << isa_name(isa);
        }
      }
}

TEST(Kernels, FixedSumsOfEveryIsaMatchTheScalarReference) {
  for (GgmlType type : kPackedTypes)
    for (int64_t cols : test_cols(type))
      for (auto [rows, tokens] : {std::pair{1, 1}, {5, 1}, {9, 2}, {3, 3}, {6, 17}}) {
        const std::vector<uint8_t> file = file_rows(type, rows, cols, 5 * rows + tokens);
        const std::vector<uint8_t> w = packed(type, file, cols);
        const std::vector<float> x = random_floats(tokens * cols, 8 + tokens, 1e-7f);
        std::vector<float> scale(tokens);
        for (int t = 0; t < tokens; ++t) scale[t] = 1.0f / (1 + t);
        QuantizedActivations qa;
        qa.quantize(x.data(), tokens, cols);
        const Activations a = qa.view(x.data(), 0, tokens);
        const Matrix m{type, rows, cols, w.data(), packed_row_bytes(type, cols)};
        std::vector<float> plain(tokens * rows);
        matmul_rows(kScalarKernels, m, 0, rows, a, plain.data(), rows);
        std::vector<int64_t> want(tokens * rows), got(tokens * rows);
        ASSERT_TRUE(matmul_rows_fixed(kScalarKernels, m, 0, rows, a, scale.data(), want.data(), rows));
        for (Isa isa : supported_isas()) {
          ASSERT_TRUE(matmul_rows_fixed(kernel_set(isa), m, 0, rows, a, scale.data(), got.data(), rows));
          for (int t = 0; t < tokens; ++t)
            for (int r = 0; r < rows; ++r) {
              // The blocks' products differ from the scalar ones by float
              // rounding only (a fused multiply-add where it multiplies and
              // adds), and the fixed sum is the float one weighed: a few
              // ulps of the sum of |w x|, weighed.
              const std::vector<float> xf = dequantized(a, t);
              std::vector<float> wf(cols);
              dequantize_row(type, file.data() + r * row_bytes(type, cols), wf.data(), cols);
              double magnitude = 0;
              for (int64_t i = 0; i < cols; ++i) magnitude += std::fabs(double(wf[i]) * xf[i]);
              const double tolerance = 1e-5 * magnitude * scale[t] + 1e-8;
              const float g = fixed_to_float(got[t * rows + r]);
              EXPECT_NEAR(g, fixed_to_float(want[t * rows + r]), tolerance)
                  << type_name(type) << " cols=" << cols << " " << rows << "x" << tokens << " row " << r << " token "
                  << t << " isa=" << isa_name(isa);
              EXPECT_NEAR(g, plain[t * rows + r] * scale[t], tolerance) << type_name(type) << " cols=" << cols;
              int64_t alone;
              ASSERT_TRUE(kernel_set(isa).matmul_fixed(type)(w.data(), m.row_bytes, rows, r, r + 1,
                                                             qa.view(x.data(), t, 1), &scale[t], &alone, 1));
              EXPECT_EQ(alone, got[t * rows + r]) << "row " << r << " token " << t << " alone, isa=" << isa_name(isa);
            }
        }
      }
}

TEST(Kernels, FixedSumsOfFloatWeightsAreTheSameBitsForAnyCut) {
  const int64_t rows = 3, cols = 2880;
  const int tokens = 2;
  for (Isa isa : supported_isas())
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
      const std::vector<uint8_t> file = file_rows(type, rows, cols, 31);
      const std::vector<float> x = random_floats(tokens * cols, 32);
      const uint64_t rb = row_bytes(type, cols);
      auto product = [&](int64_t begin, int64_t end) {
        std::vector<uint8_t> w(rows * row_bytes(type, end - begin));
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(w.data() + r * row_bytes(type, end - begin), file.data() + r * rb + row_bytes(type, begin),
                      row_bytes(type, end - begin));
        std::vector<float> xs(tokens * (end - begin));
        for (int t = 0; t < tokens; ++t)
          std::copy_n(x.data() + t * cols + begin, end - begin, xs.data() + t * (end - begin));
        const Matrix m{type, rows, end - begin, w.data(), row_bytes(type, end - begin)};
        std::vector<int64_t> y(tokens * rows);
        const Activations a{.f = xs.data(), .cols = end - begin, .tokens = tokens};
        EXPECT_TRUE(matmul_rows_fixed(kernel_set(isa), m, 0, rows, a, nullptr, y.data(), rows));
        return y;
      };
      const std::vector<int64_t> whole = product(0, cols);
      for (int64_t cut : {32, 1440, 2848}) {
        const std::vector<int64_t> a = product(0, cut), b = product(cut, cols);
        for (int64_t i = 0; i < tokens * rows; ++i)
          ASSERT_EQ(a[i] + b[i], whole[i]) << type_name(type) << " cut at " << cut << " isa=" << isa_name(isa);
      }
    }
}

TEST(Kernels, FixedSumsRefuseProductsPastTheirRange) {
  const int64_t rows = 4, cols = 256;
  for (Isa isa : supported_isas())
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::F32}) {
      std::vector<float> wf(rows * cols, 1.0f);
      std::vector<uint8_t> file(rows * row_bytes(type, cols));
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(type, wf.data() + r * cols, file.data() + r * row_bytes(type, cols), cols);
      const std::vector<uint8_t> w = type == GgmlType::F32 ? file : packed(type, file, cols);
      const Matrix m{type, rows, cols, w.data(),
                     type == GgmlType::F32 ? row_bytes(type, cols) : packed_row_bytes(type, cols)};
      for (float value : {1e3f, 1e5f, std::nanf("")}) {
        if (std::isnan(value) && type != GgmlType::F32) continue;  // int8 activations cannot hold one
        std::vector<float> x(cols, value);                         // a block's product: 32 x value
        QuantizedActivations qa;
        qa.quantize(x.data(), 1, cols);
        std::vector<int64_t> y(rows);
        const bool in_range = value * 32 < 0x1p19f;
        EXPECT_EQ(matmul_rows_fixed(kernel_set(isa), m, 0, rows, qa.view(x.data(), 0, 1), nullptr, y.data(), rows),
                  in_range)
            << type_name(type) << " x=" << value << " isa=" << isa_name(isa);
        if (in_range) {
          EXPECT_NEAR(fixed_to_float(y[0]), value * cols, value * cols * 1e-2);
        }
      }
    }
}

TEST(Kernels, FloatKernelsOfEveryIsaMatchTheScalarReference) {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (int64_t n : {1, 7, 8, 15, 16, 33, 2880, 4099}) {
      const std::vector<uint8_t> w = file_rows(type, 1, n, static_cast<uint32_t>(n));
      const std::vector<float> x = random_floats(n, 9);
      auto run = [&](const KernelSet& k) {
        return (type == GgmlType::F32 ? k.f32 : type == GgmlType::F16 ? k.f16 : k.bf16)(w.data(), x.data(), n);
      };
      std::vector<float> wf(n);
      dequantize_row(type, w.data(), wf.data(), n);
      double magnitude = 0;
      for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(double(wf[i]) * x[i]);
      const float want = run(kScalarKernels);
      for (Isa isa : supported_isas())
        EXPECT_NEAR(run(kernel_set(isa)), want, 1e-5 * magnitude + 1e-30)
            << type_name(type) << " n=" << n << " isa=" << isa_name(isa);
    }
}

TEST(Kernels, SwigluOfEveryIsaMatchesTheScalarReference) {
  // Inputs across the clamps and far past them (the gate is clamped only
  // above: a large negative gate sends exp toward overflow), with NaN among
  // them, and every tail length.
  const float alpha = 1.702f, limit = 7.0f;
  for (int64_t n : {1, 7, 8, 9, 16, 31, 2880}) {
    std::vector<float> gate = random_floats(n, 11), up = random_floats(n, 12);
    const std::vector<float> gate_bias = random_floats(n, 13), up_bias = random_floats(n, 14);
    for (int64_t i = 0; i < n; ++i) gate[i] *= 1 + i % 7 * 5.0f, up[i] *= 1 + i % 5 * 4.0f;
    if (n > 20) gate[3] = -200.0f, gate[4] = -60.0f, gate[5] = std::nanf(""), up[6] = std::nanf("");
    std::vector<float> want(n), got(n);
    kScalarKernels.swiglu(gate.data(), up.data(), gate_bias.data(), up_bias.data(), n, alpha, limit, want.data());
    for (Isa isa : supported_isas()) {
      kernel_set(isa).swiglu(gate.data(), up.data(), gate_bias.data(), up_bias.data(), n, alpha, limit, got.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(got[i], want[i], 3e-7f * std::fabs(want[i]) + 1e-30f)
            << "n=" << n << " i=" << i << " gate=" << gate[i] + gate_bias[i] << " isa=" << isa_name(isa);
    }
  }
}

// A prefill tile's attention kernel gives each token's heads the bits
// attend_run gives that token alone, for every type and instruction set:
// heads of 64 and of an odd size (a tail past the last 8 dimensions), tiles
// of 1..9 tokens (rows not a multiple of 4), runs of whole key blocks, of a
// few lanes inside one and across a block's end, into cleared states and
// then into states of earlier positions (the rescale of the old values).
TEST(Kernels, AttendTileIsAttendRunForEachToken) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const int heads = 3, blocks = 3;
  for (Isa isa : supported_isas())
    for (int t = 0; t < kKvTypeCount; ++t)
      for (int hd : {64, 45}) {
        const KvType type = static_cast<KvType>(t);
        const int64_t floats = attention_state_floats(heads, hd);
        // Two runs' key blocks and their value rows.
        std::vector<uint8_t> keys(2 * blocks * kv_key_block_bytes(type, hd)),
            rows(2 * blocks * kKeyBlock * kv_value_bytes(type, hd));
        std::vector<float> x(hd);
        for (int b = 0; b < 2 * blocks; ++b)
          for (int lane = 0; lane < kKeyBlock; ++lane) {
            for (float& f : x) f = normal(rng);
            store_keys(type, keys.data() + b * kv_key_block_bytes(type, hd), hd, lane, x.data());
            for (float& f : x) f = normal(rng);
            store_values(type, rows.data() + (b * kKeyBlock + lane) * kv_value_bytes(type, hd), hd, x.data());
          }
        for (int tokens : {1, 2, 5, 9})
          for (auto [first, count] : {std::pair{0, 48}, std::pair{3, 9}, std::pair{15, 1}, std::pair{5, 30}}) {
            std::vector<float> q(tokens * heads * hd), tiled(tokens * floats), alone(tokens * floats);
            for (float& f : q) f = normal(rng);
            std::vector<const float*> qs(tokens);
            std::vector<AttentionState> tile_states(tokens);
            for (int k = 0; k < tokens; ++k) {
              qs[k] = q.data() + k * heads * hd;
              tile_states[k] = attention_state(tiled.data() + k * floats, heads);
              clear_attention_state(tile_states[k], heads, hd);
              clear_attention_state(attention_state(alone.data() + k * floats, heads), heads, hd);
            }
            const KernelSet& ks = kernel_set(isa);
            for (int run = 0; run < 2; ++run) {
              const uint8_t* kb[blocks];
              for (int b = 0; b < blocks; ++b) kb[b] = keys.data() + (run * blocks + b) * kv_key_block_bytes(type, hd);
              std::vector<const uint8_t*> v(count);
              for (int j = 0; j < count; ++j)
                v[j] = rows.data() + (run * blocks * kKeyBlock + first + j) * kv_value_bytes(type, hd);
              ks.attend_tile[t](qs.data(), tokens, heads, hd, kb, v.data(), 0.125f, first, count, tile_states.data());
              for (int k = 0; k < tokens; ++k) {
                const AttentionState s = attention_state(alone.data() + k * floats, heads);
                ks.attend_run[t](qs[k], heads, hd, kb, v.data(), 0.125f, first, count, s.max, s.sum, s.acc);
              }
            }
            for (int64_t i = 0; i < tokens * floats; ++i)
              ASSERT_EQ(tiled[i], alone[i])
                  << isa_name(isa) << " " << kv_type_name(type) << " head_dim " << hd << " tokens " << tokens
                  << " lanes " << first << "+" << count << " float " << i;
          }
      }
}

TEST(Kernels, MatmulRowsFillsOnlyItsRowsAtTheStride) {
  const int64_t rows = 5, cols = 64;
  const int tokens = 3;
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::F32}) {
    const std::vector<uint8_t> file = file_rows(type, rows, cols, 100);
    const std::vector<uint8_t> w = type == GgmlType::F32 ? file : packed(type, file, cols);
    const std::vector<float> x = random_floats(tokens * cols, 200);
    QuantizedActivations qa;
    qa.quantize(x.data(), tokens, cols);
    const Matrix m{type, rows, cols, w.data(), packed_row_bytes(type, cols)};
    std::vector<float> y(tokens * rows, -1);
    matmul_rows(kScalarKernels, m, 1, 4, qa.view(x.data(), 0, tokens), y.data(), rows);
    for (int t = 0; t < tokens; ++t)
      for (int r = 0; r < rows; ++r) {
        float want = -1;
        if (r >= 1 && r < 4) {
          if (type == GgmlType::F32) {
            want = kScalarKernels.f32(m.row(r), x.data() + t * cols, cols);
          } else {
            kScalarKernels.matmul(type)(m.data, m.row_bytes, rows, r, r + 1, qa.view(x.data(), t, 1), &want, 1);
          }
        }
        EXPECT_EQ(y[t * rows + r], want) << type_name(type) << " " << t << "," << r;
      }
  }
}

}  // namespace
}  // namespace tps
