// The small pieces of gpt-oss math that the kernels and the forward pass
// share, as plain functions so each can be tested alone against
// hand-computed values (spec §2): RMSNorm, the softmax with a sink, and the
// clamped SwiGLU. The scalar kernels are written with them.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

namespace tps {

// out = g * x / sqrt(mean(x^2) + eps); the sum of squares in double.
void rmsnorm(const float* x, const float* g, float eps, int64_t n, float* out);

// Softmax over scores with an extra sink logit that joins only the
// denominator (unscaled, no value): scores become weights summing to < 1.
void softmax_with_sink(std::span<float> scores, float sink);

// gpt-oss's expert activation (spec §2.5): the gate clamped above at limit,
// the up branch clamped to [-limit, limit], g * sigmoid(alpha g) * (u + 1).
inline float swiglu_oai(float gate, float up, float alpha, float limit) {
  const float g = std::fmin(gate, limit);
  const float u = std::fmax(std::fmin(up, limit), -limit);
  return g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
}

}  // namespace tps
