// Matrix products over weight rows: y[t][r] = row r . x[t] for a range of
// rows and every token of a batch. Quantized weights go through the integer
// kernels in tiles (each weight pair decoded once for several tokens, so
// prefill reads and decodes the weights once per batch, and decode streams
// them once); float weights a row at a time, the row in L1 for every token.
#pragma once

#include <cstdint>
#include <new>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/matrix.h"

namespace tps {

// Storage aligned to cache lines: a vector load of the kernels must not
// straddle two lines.
template <typename T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <typename U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const LineAligned&) const = default;
};

// Activations quantized for the integer kernels (the layout of Activations
// in kernel_set.h), kept between calls so that decode allocates nothing.
class QuantizedActivations {
 public:
  // Quantizes `tokens` rows of cols floats (cols a multiple of 32): per block
  // d = max|x| / 127, q = x / d rounded to nearest (ties to even), d then
  // rounded to F16 as in Q8_0 blocks; and the u, offset and sum planes
  // derived from q and d (kernel_set.h).
  void quantize(const float* x, int tokens, int64_t cols);
  // The same in two steps, so that threads can share the rows: room for
  // `tokens` rows of cols, then rows [first, first + count) of x (row t of
  // x is token t).
  void resize(int tokens, int64_t cols);
  // The bytes resize(tokens, cols) allocates.
  static uint64_t bytes_for(int64_t tokens, int64_t cols);
  void quantize_rows(const float* x, int first, int count);
  // The view of tokens [first, first + count) of the last quantize(), with
  // their floats from f (row `first` of f is the view's first token).
  Activations view(const float* f, int first, int count) const;

 private:
  std::vector<int8_t, LineAligned<int8_t>> q_;
  std::vector<uint8_t, LineAligned<uint8_t>> u_;
  std::vector<float, LineAligned<float>> d_, offset_, sum_, sum_lo_, sum_hi_;
  int64_t cols_ = 0;
};

// The fewest rows of w worth handing a thread at a time (the grain of
// ThreadPool::Chunks): whole 16-row panels (the batch tiles) of at least
// ~64 KiB, a stream long enough for the prefetchers.
int64_t row_grain(const Matrix& w);

// y[t * y_stride + r] = (row r of w) . x[t] for r in [row_begin, row_end).
// Weights of a packed type must be packed (kernels/packed_rows.h) and x
// quantized.
void matmul_rows(const KernelSet& k, const Matrix& w, int64_t row_begin, int64_t row_end, const Activations& x,
                 float* y, int64_t y_stride);

// Split-invariant products. A model split across ranks cuts the sums of
// some products (attention's output projection by heads, the experts' down
// projection by features or by expert) into partial sums that ranks add. So
// that every split gives one rank's bits, those products are summed in fixed
// point: each 32-value block's product (its float, as the kernels form it)
// times scale[t] is rounded to a multiple of 2^-32 and added in int64 --
// exactly, so the total is the same whatever cuts the row's blocks and
// whatever order the parts are added in. y[t * y_stride + r] holds the row's
// total in units of 2^-32 (to_float); scale (nullptr: 1) weighs each token,
// |scale| <= 1. Returns false when a block's product reached 2^19 (or was
// not a number): numbers that large mean the model has diverged, and the
// rounding holds only below it.
bool matmul_rows_fixed(const KernelSet& k, const Matrix& w, int64_t row_begin, int64_t row_end, const Activations& x,
                       const float* scale, int64_t* y, int64_t y_stride);

// The range matmul_rows_fixed's false means, for messages.
inline constexpr const char* kFixedRangeText = "a 32-value block's product of 2^19 or more, or not a number";

// A fixed-point total of matmul_rows_fixed as a float.
inline float fixed_to_float(int64_t v) { return static_cast<float>(static_cast<double>(v) * 0x1p-32); }

}  // namespace tps
