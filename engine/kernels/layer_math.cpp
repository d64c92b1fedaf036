#include "engine/kernels/layer_math.h"

#include <algorithm>

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

}  // namespace tps
