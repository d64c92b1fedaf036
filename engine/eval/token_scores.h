// How well a model predicts a text, token by token, as llama.cpp's
// llama-perplexity measures it, so that its figures and tps's compare:
// perplexity with its uncertainty, and against a base model's saved
// log-probabilities the KL divergence, top-1 agreement and the change in
// the probability of each actual next token (docs/QUALITY.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace tps {

// A row of logits' softmax normaliser as llama-perplexity takes it: the
// largest logit in float, the sum of exp(l - max) in double. The
// log-probability of token i is (l[i] - max) - log_sum.
struct LogSoftmax {
  float max = 0;
  double log_sum = 0;
  double logprob(float logit) const { return (logit - max) - log_sum; }
};
LogSoftmax log_softmax(std::span<const float> logits);

// A base model's log-probabilities for one position, as a logits file keeps
// them (engine/eval/logits_file.h): 16-bit steps above a floor.
struct BaseRow {
  float scale = 0, min_logprob = 0;
  std::span<const uint16_t> steps;  // [vocab]
  float logprob(int32_t i) const { return scale * steps[i] + min_logprob; }
};

// A mean over tokens with llama-perplexity's uncertainty: the standard error
// sqrt(variance / (n - 1)), 0 for 10 tokens or fewer.
struct Mean {
  double value = 0, error = 0;
};

// Perplexity, accumulated token by token: exp of the mean negative
// log-likelihood, its error by the delta method (error of the mean x PPL).
class PerplexityStats {
 public:
  void add(double nll) { sum_ += nll, sum2_ += nll * nll, ++n_; }
  int64_t tokens() const { return n_; }
  double ppl() const;
  double ppl_error() const;

 private:
  double sum_ = 0, sum2_ = 0;
  int64_t n_ = 0;
};

// What one position says against the base model.
struct TokenComparison {
  double nll = 0, base_nll = 0;  // of the actual next token
  double kl = 0;                 // KL(base || this), over the base's tokens above e^-16
  bool same_top = false;         // the two most likely tokens agree
  double delta_p = 0;            // p(next) - base p(next)
};
TokenComparison compare(std::span<const float> logits, const BaseRow& base, int32_t next);

// The statistics llama-perplexity --kl-divergence prints, over all positions.
struct KlReport {
  int64_t tokens = 0;
  Mean ppl, base_ppl, log_ppl_ratio, ppl_ratio, ppl_difference;
  double log_ppl_correlation = 0;
  Mean kl, same_top, delta_p, rms_delta_p;
  // Named points of the sorted per-token values, largest first: "Maximum",
  // "99.9%", ..., "Median", ..., "Minimum".
  struct Quantile {
    const char* name;
    double value;
  };
  std::vector<Quantile> kl_quantiles, delta_p_quantiles;
};

class KlStats {
 public:
  void add(const TokenComparison& t);
  int64_t tokens() const { return static_cast<int64_t>(kl_.size()); }
  // The running figures, without report()'s sorting (for progress lines).
  double ppl() const { return std::exp(nll_ / tokens()); }
  double mean_kl() const { return kl_sum_ / tokens(); }
  KlReport report() const;

 private:
  double nll_ = 0, nll2_ = 0, base_ = 0, base2_ = 0, cross_ = 0;
  double kl_sum_ = 0, kl2_ = 0, dp_ = 0, dp2_ = 0, dp4_ = 0;
  int64_t same_ = 0;
  std::vector<float> kl_, dps_;  // per token, for the percentiles
};

// llama-perplexity's percentile of sorted values: linear interpolation at
// fraction f of the way from the first to the last.
double percentile(const std::vector<float>& sorted, float f);

}  // namespace tps
