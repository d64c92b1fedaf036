#include "engine/layer_math.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace tps {

void rmsnorm(const float* x, const float* g, float eps, int64_t n, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] * (x[i] * inv);
}

void softmax_with_sink(std::span<float> z, float sink) {
  float m = sink;
  for (float v : z) m = std::max(m, v);
  float denom = std::exp(sink - m);
  for (float& v : z) denom += v = std::exp(v - m);
  for (float& v : z) v /= denom;
}

void select_experts(std::span<const float> r, int k, int* experts, float* weights) {
  int order[256];
  const int n = static_cast<int>(r.size());
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + k, order + n,
                    [&](int a, int b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += weights[j] = std::exp(r[order[j]] - r[order[0]]);
  for (int j = 0; j < k; ++j) {
    experts[j] = order[j];
    weights[j] /= sum;
  }
}

}  // namespace tps
