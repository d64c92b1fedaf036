#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace tps {

void validate(const SamplerParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature))
    throw InputError(cat("--temp ", p.temperature, ": expected a temperature >= 0 (0 = greedy)"));
  if (p.top_k < 0) throw InputError(cat("--top-k ", p.top_k, ": expected >= 0 (0 = off)"));
  if (!(p.top_p > 0 && p.top_p <= 1))
    throw InputError(cat("--top-p ", p.top_p, ": expected a value in (0, 1]"));
  if (!(p.min_p >= 0 && p.min_p < 1))
    throw InputError(cat("--min-p ", p.min_p, ": expected a value in [0, 1)"));
}

Sampler::Sampler(const SamplerParams& params) : p_(params), state_(params.seed) {
  validate(params);
}

double Sampler::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature == 0) return argmax(logits);
  const double inv_t = 1.0 / p_.temperature;
  if (p_.top_k == 0 && p_.top_p == 1 && p_.min_p == 0) {
    // No filter: draw from the whole tempered distribution without sorting.
    const float top = logits[argmax(logits)];
    double total = 0;
    for (float v : logits) total += std::exp((v - top) * inv_t);
    double r = uniform() * total;
    for (size_t i = 0; i < logits.size(); ++i) {
      r -= std::exp((logits[i] - top) * inv_t);
      if (r < 0) return static_cast<int32_t>(i);
    }
    return argmax(logits);
  }
  // Candidates sorted by logit, most likely first (ties: lowest id).
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  auto better = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t n = candidates_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    n = p_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), better);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), better);
  }
  // Tempered probabilities of the survivors (relative to the best).
  std::vector<double> prob(n);
  double total = 0;
  const double top = candidates_[0].first;
  for (size_t i = 0; i < n; ++i) total += prob[i] = std::exp((candidates_[i].first - top) * inv_t);
  size_t keep = n;
  if (p_.top_p < 1) {
    double acc = 0;
    for (size_t i = 0; i < n; ++i) {
      acc += prob[i] / total;
      if (acc >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0) {
    size_t i = 1;
    while (i < keep && prob[i] >= p_.min_p * prob[0]) ++i;
    keep = i;
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += prob[i];
  double r = uniform() * kept;
  for (size_t i = 0; i < keep; ++i) {
    r -= prob[i];
    if (r < 0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

namespace {
double log_sum_exp(std::span<const float> logits) {
  float m = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v) - m);
  return m + std::log(s);
}
}  // namespace

float logprob_of(std::span<const float> logits, int32_t id) {
  return static_cast<float>(logits[id] - log_sum_exp(logits));
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k) {
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  size_t n = std::min<size_t>(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double lse = log_sum_exp(logits);
  std::vector<TokenLogprob> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back({ids[i], static_cast<float>(logits[ids[i]] - lse)});
  return out;
}

}  // namespace tps
