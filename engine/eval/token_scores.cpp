#include "engine/eval/token_scores.h"

#include <algorithm>
#include <cmath>

#include "engine/step/sampler.h"

namespace tps {

LogSoftmax log_softmax(std::span<const float> logits) {
  LogSoftmax s;
  s.max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(l - s.max);
  s.log_sum = std::log(sum);
  return s;
}

namespace {

// The mean of per-token values and its standard error (llama-perplexity's
// rule: none for 10 tokens or fewer, or for no spread).
Mean mean_of(double sum, double sum2, int64_t n) {
  Mean m;
  if (n == 0) return m;
  m.value = sum / n;
  const double var = sum2 / n - m.value * m.value;
  if (var > 0 && n > 10) m.error = std::sqrt(var / (n - 1));
  return m;
}

double covariance(double a, double b, double ab, int64_t n) {
  return n < 10 ? 0 : (ab / n - (a / n) * (b / n)) / (n - 1);
}

}  // namespace

double PerplexityStats::ppl() const { return std::exp(sum_ / n_); }

double PerplexityStats::ppl_error() const {
  const double mean = sum_ / n_, var = sum2_ / n_ - mean * mean;
  return n_ > 1 && var > 0 ? std::sqrt(var / (n_ - 1)) * ppl() : 0;
}

TokenComparison compare(std::span<const float> logits, const BaseRow& base, int32_t next) {
  const LogSoftmax q = log_softmax(logits);
  // As llama-perplexity: this model's normaliser in float here.
  const float log_z = q.max + static_cast<float>(q.log_sum);
  TokenComparison t;
  t.nll = log_z - logits[next];
  t.base_nll = -base.logprob(next);
  double kl = 0;
  int32_t base_top = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float b = base.logprob(static_cast<int32_t>(i));
    if (base.steps[i] > base.steps[base_top]) base_top = static_cast<int32_t>(i);
    if (b > -16.f) kl += std::exp(b) * (b - (logits[i] - log_z));
  }
  t.kl = kl;
  t.same_top = argmax(logits) == base_top;
  t.delta_p = std::exp(static_cast<float>(-t.nll)) - std::exp(static_cast<float>(-t.base_nll));
  return t;
}

void KlStats::add(const TokenComparison& t) {
  nll_ += t.nll, nll2_ += t.nll * t.nll;
  base_ += t.base_nll, base2_ += t.base_nll * t.base_nll, cross_ += t.nll * t.base_nll;
  kl_sum_ += t.kl, kl2_ += t.kl * t.kl;
  dp_ += t.delta_p, dp2_ += t.delta_p * t.delta_p, dp4_ += t.delta_p * t.delta_p * t.delta_p * t.delta_p;
  same_ += t.same_top;
  kl_.push_back(static_cast<float>(t.kl)), dps_.push_back(static_cast<float>(t.delta_p));
}

double percentile(const std::vector<float>& v, float f) {
  if (v.empty()) return 0;
  if (f <= 0) return v.front();
  if (f >= 1) return v.back();
  const float p = f * static_cast<float>(v.size() - 1);
  const size_t i = static_cast<size_t>(p);
  const float frac = p - static_cast<float>(i);
  return (1 - frac) * v[i] + frac * v[std::min(i + 1, v.size() - 1)];
}

namespace {
double median(const std::vector<float>& v) {
  const size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
}
}  // namespace

KlReport KlStats::report() const {
  KlReport r;
  const int64_t n = tokens();
  r.tokens = n;
  if (n == 0) return r;
  const Mean q = mean_of(nll_, nll2_, n), b = mean_of(base_, base2_, n);
  const double cov = covariance(nll_, base_, cross_, n);
  r.ppl = {std::exp(q.value), std::exp(q.value) * q.error};
  r.base_ppl = {std::exp(b.value), std::exp(b.value) * b.error};
  r.log_ppl_correlation = q.error > 0 && b.error > 0 ? cov / (q.error * b.error) : 0;
  const double log_ratio_error = std::sqrt(std::max(0.0, q.error * q.error + b.error * b.error - 2 * cov));
  r.log_ppl_ratio = {q.value - b.value, log_ratio_error};
  r.ppl_ratio = {std::exp(q.value - b.value), std::exp(q.value - b.value) * log_ratio_error};
  r.ppl_difference = {r.ppl.value - r.base_ppl.value,
                      std::sqrt(std::max(0.0, r.ppl.error * r.ppl.error + r.base_ppl.error * r.base_ppl.error -
                                                  2 * r.ppl.value * r.base_ppl.value * cov))};
  r.kl = mean_of(kl_sum_, kl2_, n);
  const double p = static_cast<double>(same_) / n;
  r.same_top = {p, n > 1 ? std::sqrt(p * (1 - p) / (n - 1)) : 0};
  r.delta_p = mean_of(dp_, dp2_, n);
  const Mean ms = mean_of(dp2_, dp4_, n);
  const double rms = std::sqrt(ms.value);
  r.rms_delta_p = {rms, rms > 0 ? 0.5 * ms.error / rms : 0};

  // The points llama-perplexity prints (Δp has the quartiles too).
  auto quantiles = [](std::vector<float> v, bool quartiles) {
    std::sort(v.begin(), v.end());
    std::vector<KlReport::Quantile> q = {{"Maximum", v.back()},
                                         {"99.9%", percentile(v, 0.999f)},
                                         {"99.0%", percentile(v, 0.99f)},
                                         {"95.0%", percentile(v, 0.95f)},
                                         {"90.0%", percentile(v, 0.90f)}};
    if (quartiles) q.push_back({"75.0%", percentile(v, 0.75f)});
    q.push_back({"Median", median(v)});
    if (quartiles) q.push_back({"25.0%", percentile(v, 0.25f)});
    for (auto [name, f] : {std::pair{"10.0%", 0.10f}, {"5.0%", 0.05f}, {"1.0%", 0.01f}, {"0.1%", 0.001f}})
      q.push_back({name, percentile(v, f)});
    q.push_back({"Minimum", v.front()});
    return q;
  };
  r.kl_quantiles = quantiles(kl_, false);
  r.delta_p_quantiles = quantiles(dps_, true);
  return r;
}

}  // namespace tps
