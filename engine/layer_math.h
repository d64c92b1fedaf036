// The small pieces of gpt-oss math the forward pass is made of, as plain
// functions so each can be tested alone against hand-computed values
// (spec §2): RMSNorm, the attention window, the softmax with a sink, expert
// selection, and the clamped SwiGLU.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

namespace tps {

// out = g * x / sqrt(mean(x^2) + eps); the sum of squares in double.
void rmsnorm(const float* x, const float* g, float eps, int64_t n, float* out);

// The first position a query at pos may attend to: pos - window + 1 on
// sliding layers (the query sees itself and window - 1 earlier tokens), 0 on
// full-attention layers.
inline int first_visible(int pos, int window, bool sliding) {
  return sliding && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

// Softmax over scores with an extra sink logit that joins only the
// denominator (unscaled, no value): scores become weights summing to < 1.
void softmax_with_sink(std::span<float> scores, float sink);

// Top-k experts by raw router logit (ties: the lower index first) and the
// softmax of the chosen logits. experts/weights have k entries.
void select_experts(std::span<const float> logits, int k, int* experts, float* weights);

// gpt-oss's expert activation (spec §2.5): the gate clamped above at limit,
// the up branch clamped to [-limit, limit], g * sigmoid(alpha g) * (u + 1).
inline float swiglu_oai(float gate, float up, float alpha, float limit) {
  const float g = std::fmin(gate, limit);
  const float u = std::fmax(std::fmin(up, limit), -limit);
  return g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
}

}  // namespace tps
