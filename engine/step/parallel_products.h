// The forward pass's matrix products on a rank's thread pool: several
// products over the same activations in one parallel pass, and the int8
// quantization of activations shared by the threads. Each output element is
// computed by one thread, so results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "engine/kernels/matmul.h"
#include "runtime/thread_pool.h"

namespace tps {

// y[t][r] = w.row(r) . x[t] (+ bias[r]) for every row of w; y is [n][w.rows].
struct Product {
  const Matrix& w;
  const float* bias;  // nullptr: none
  float* y;
};

// Every product over x's tokens, in one pass: the rows of all of them form
// one index space handed out in chunks, one wake-up and one barrier for all.
void run_products(ThreadPool& pool, const KernelSet& kernels, const Activations& x,
                  std::initializer_list<Product> products);

// y[t][r] = w.row(r) . x[t] as split-invariant fixed-point sums
// (matmul_rows_fixed), each token's weighted by scale[t] (nullptr: 1);
// y is [x.tokens][w.rows]. False when a block's product was out of range.
bool run_fixed_product(ThreadPool& pool, const KernelSet& kernels, const Activations& x, const Matrix& w,
                       const float* scale, int64_t* y);

// qa.quantize(x, n, cols) with the tokens shared by the pool's threads (one
// token on the calling thread: no wake-up for a decode step).
void quantize_on(ThreadPool& pool, QuantizedActivations& qa, const float* x, int n, int64_t cols);

// Tokens [first, first + count) of x ([*][cols]), with their int8 form from
// q (the quantize of x) when the weights take quantized inputs.
inline Activations token_rows(const float* x, int64_t cols, int first, int count, const QuantizedActivations* q) {
  return q ? q->view(x, first, count) : Activations{.f = x + first * cols, .cols = cols, .tokens = count};
}

// The chunks a thread takes of an index space of `per` items in each group,
// as runs fn(group, lo, hi) with [lo, hi) inside one group.
template <typename Fn>
void take_group_runs(ThreadPool::Chunks& chunks, int64_t per, Fn fn) {
  for (int64_t begin, end; chunks.next(begin, end);)
    for (int64_t i = begin; i < end;) {
      const int64_t lo = i % per, hi = std::min<int64_t>(per, lo + (end - i));
      fn(static_cast<size_t>(i / per), lo, hi);
      i += hi - lo;
    }
}

}  // namespace tps
