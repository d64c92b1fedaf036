// Picks the next token from logits: greedy, or temperature with top-k,
// top-p and min-p filters, from a seeded generator of our own (the bits and
// the arithmetic are ours, so a seed gives the same tokens on every
// platform and library version).
//
// Order: logits / temperature -> softmax -> top-k -> top-p -> min-p ->
// renormalise -> draw. temperature = 0 is greedy (ties: lowest id).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tps {

struct SamplerParams {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // (0, 1]; 1: off
  float min_p = 0.0f;        // [0, 1); 0: off
  uint64_t seed = 0;
};

// Throws InputError naming the parameter for values outside the ranges above.
void validate(const SamplerParams& params);

struct TokenLogprob {
  int32_t id;
  float logprob;  // natural log of the softmax of the raw logits (temperature 1)
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  int32_t sample(std::span<const float> logits);

 private:
  double uniform();  // [0, 1)
  SamplerParams p_;
  uint64_t state_;
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch, reused
};

// Index of the largest logit (lowest index on ties).
int32_t argmax(std::span<const float> logits);

// The k most likely tokens with their log-probabilities, most likely first
// (ties: lowest id), and the log-probability of any token: what
// --top-logprobs reports.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k);
float logprob_of(std::span<const float> logits, int32_t id);

}  // namespace tps
