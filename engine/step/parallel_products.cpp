#include "engine/step/parallel_products.h"

#include <atomic>

namespace tps {

void run_products(ThreadPool& pool, const KernelSet& kernels, const Activations& x,
                  std::initializer_list<Product> products) {
  int64_t total = 0;
  for (const Product& p : products) total += p.w.rows;
  ThreadPool::Chunks chunks(total, row_grain(products.begin()->w), pool.size());
  pool.run([&](int, int) {
    for (int64_t begin, end; chunks.next(begin, end);) {
      int64_t first = 0;  // of the current product, in the index space
      for (const Product& p : products) {
        const int64_t b = std::max(begin, first) - first, e = std::min(end, first + p.w.rows) - first;
        first += p.w.rows;
        if (b >= e) continue;
        matmul_rows(kernels, p.w, b, e, x, p.y, p.w.rows);
        if (p.bias)
          for (int i = 0; i < x.tokens; ++i)
            for (int64_t r = b; r < e; ++r) p.y[i * p.w.rows + r] += p.bias[r];
      }
    }
  });
}

bool run_fixed_product(ThreadPool& pool, const KernelSet& kernels, const Activations& x, const Matrix& w,
                       const float* scale, int64_t* y) {
  ThreadPool::Chunks chunks(w.rows, row_grain(w), pool.size());
  std::atomic<bool> ok{true};
  pool.run([&](int, int) {
    for (int64_t begin, end; chunks.next(begin, end);)
      if (!matmul_rows_fixed(kernels, w, begin, end, x, scale, y, w.rows)) ok = false;
  });
  return ok;
}

void quantize_on(ThreadPool& pool, QuantizedActivations& qa, const float* x, int n, int64_t cols) {
  qa.resize(n, cols);
  if (n == 1) return qa.quantize_rows(x, 0, 1);
  pool.run([&](int t, int nt) {
    auto [begin, end] = ThreadPool::split(n, t, nt);
    qa.quantize_rows(x, static_cast<int>(begin), static_cast<int>(end - begin));
  });
}

}  // namespace tps
