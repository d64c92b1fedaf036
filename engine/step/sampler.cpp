#include "engine/step/sampler.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "runtime/error.h"
#include "topology/model_shape.h"

namespace tps {

void validate(const SamplerParams& p) {
  if (!std::isfinite(p.temperature))  // inf is too hot to sample, not negative
    throw InputError(cat("--temp ", p.temperature, ": expected a finite temperature >= 0 (0 = greedy)"));
  if (p.temperature < 0)
    throw InputError(cat("--temp ", p.temperature, ": expected a temperature >= 0 (0 = greedy), not a negative one"));
  if (p.top_k < 0) throw InputError(cat("--top-k ", p.top_k, ": expected >= 0 (0 = off)"));
  if (!(p.top_p > 0 && p.top_p <= 1)) throw InputError(cat("--top-p ", p.top_p, ": expected a value in (0, 1]"));
  if (!(p.min_p >= 0 && p.min_p < 1)) throw InputError(cat("--min-p ", p.min_p, ": expected a value in [0, 1)"));
}

namespace {

struct Candidate {
  float logit;
  int32_t id;
};
constexpr Candidate kNone{-INFINITY, INT32_MAX};

// Most likely first; ties: the lowest id.
bool better(const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

// Every rank's `count` values of T, rank by rank.
template <typename T>
std::vector<T> gather(Exchange& ex, const T* mine, size_t count) {
  std::vector<T> all(count * ex.size());
  ex.all_gather(mine, all.data(), count * sizeof(T));
  return all;
}
template <typename T>
std::vector<T> gather(Exchange& ex, const T& mine) {
  return gather(ex, &mine, 1);
}

Candidate best(const SplitLogits& s) {
  Candidate mine = kNone;
  for (size_t i = 0; i < s.logits.size(); ++i)
    if (s.logits[i] > mine.logit) mine = {s.logits[i], static_cast<int32_t>(s.begin + static_cast<int64_t>(i))};
  std::vector<Candidate> all = gather(s.exchange, mine);
  return *std::min_element(all.begin(), all.end(), better);
}

// This rank's best m candidates, best first, padded with kNone to m.
std::vector<Candidate> local_top(const SplitLogits& s, size_t m) {
  std::vector<Candidate> c(s.logits.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = {s.logits[i], static_cast<int32_t>(s.begin + static_cast<int64_t>(i))};
  const size_t n = std::min(m, c.size());
  std::partial_sort(c.begin(), c.begin() + n, c.end(), better);
  c.resize(m, kNone);
  return c;
}

// The best m candidates of all ranks (each rank's best m, merged); fewer
// when the vocabulary has fewer. No rank sends more than the vocabulary
// (--top-k 1000000000 would gather 8 GB of padding a token).
std::vector<Candidate> global_top(const SplitLogits& s, size_t m) {
  m = std::min<size_t>(m, s.vocab);
  std::vector<Candidate> mine = local_top(s, m);
  std::vector<Candidate> all = gather(s.exchange, mine.data(), m);
  std::sort(all.begin(), all.end(), better);
  all.resize(std::min<size_t>(m, s.vocab));
  return all;
}

// sum over the vocabulary of weight(logit), per chunk of kVocabGranule ids,
// every rank getting every chunk's sum in id order.
template <typename Weight>
std::vector<double> chunk_sums(const SplitLogits& s, Weight weight) {
  const int64_t n = static_cast<int64_t>(s.logits.size());
  const int64_t chunks = (n + kVocabGranule - 1) / kVocabGranule;
  std::vector<int64_t> counts = gather(s.exchange, chunks);
  std::vector<int64_t> begins = gather(s.exchange, s.begin);
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<double> mine(most, 0.0);
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t i = c * kVocabGranule; i < std::min(n, (c + 1) * kVocabGranule); ++i) mine[c] += weight(s.logits[i]);
  std::vector<double> all = gather(s.exchange, mine.data(), most);
  // Ranks in the order of their ids.
  std::vector<int> order(s.exchange.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return begins[a] < begins[b]; });
  std::vector<double> out;
  for (int r : order) out.insert(out.end(), all.begin() + r * most, all.begin() + r * most + counts[r]);
  return out;
}

double in_order_sum(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return total;
}

// log of the sum of exp(logit) over the vocabulary.
double log_normalizer(const SplitLogits& s) {
  const double top = best(s).logit;
  return top + std::log(in_order_sum(chunk_sums(s, [&](float l) { return std::exp(l - top); })));
}

}  // namespace

Sampler::Sampler(const SamplerParams& params) : p_(params), state_(params.seed) { validate(params); }

double Sampler::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(const SplitLogits& s) {
  if (p_.temperature == 0) return argmax(s);
  const double inv_t = 1.0 / p_.temperature;
  const double u = uniform();
  const double top = best(s).logit;
  auto weight = [&](float l) { return std::exp((l - top) * inv_t); };

  // top-k keeps every token when k reaches the vocabulary: no top-k, so
  // that it costs no sort of the whole vocabulary every token.
  const int64_t top_k = p_.top_k < s.vocab ? p_.top_k : 0;
  if (top_k == 0 && p_.top_p == 1 && p_.min_p == 0) {
    // No filter: the chunk the draw falls in, then the token inside it,
    // found by the chunk's owner.
    std::vector<double> chunks = chunk_sums(s, weight);
    double r = u * in_order_sum(chunks);
    size_t c = 0;
    for (; c + 1 < chunks.size() && r >= chunks[c]; ++c) r -= chunks[c];
    int32_t found = -1;
    const int64_t first = static_cast<int64_t>(c) * kVocabGranule - s.begin;
    const int64_t n = static_cast<int64_t>(s.logits.size());
    if (first >= 0 && first < n) {
      const int64_t end = std::min(n, first + kVocabGranule);
      found = static_cast<int32_t>(s.begin + end - 1);  // if rounding leaves r >= 0
      for (int64_t i = first; i < end; ++i)
        if ((r -= weight(s.logits[i])) < 0) {
          found = static_cast<int32_t>(s.begin + i);
          break;
        }
    }
    std::vector<int32_t> all = gather(s.exchange, found);
    return *std::max_element(all.begin(), all.end());
  }

  // Survivors, most likely first, and their tempered probabilities relative
  // to the best (prob[0] = 1), normalised by `total`.
  std::vector<Candidate> cand;
  std::vector<double> prob;
  double total = 0;
  size_t keep = 0;
  auto cut = [&](size_t i, double& acc) {  // true when survivor i ends the list
    if (i > 0 && prob[i] < p_.min_p * prob[0]) {
      keep = i;
      return true;
    }
    acc += prob[i] / total;
    if (p_.top_p < 1 && acc >= p_.top_p) {
      keep = i + 1;
      return true;
    }
    return false;
  };
  if (top_k > 0) {
    // The top k of all ranks, normalised among themselves.
    cand = global_top(s, top_k);
    for (const Candidate& x : cand) total += prob.emplace_back(weight(x.logit));
    double acc = 0;
    keep = cand.size();
    for (size_t i = 0; i < cand.size(); ++i)
      if (cut(i, acc)) break;
  } else {
    // top-p and min-p over the whole vocabulary: gather each rank's best m
    // until the cut falls where no unseen candidate can come before it.
    total = in_order_sum(chunk_sums(s, weight));
    const int64_t n = static_cast<int64_t>(s.logits.size());
    std::vector<int64_t> sizes = gather(s.exchange, n);
    for (size_t m = 64;; m *= 4) {
      std::vector<Candidate> mine = local_top(s, m);
      std::vector<Candidate> all = gather(s.exchange, mine.data(), m);
      // Candidates up to the best of the last ones sent by ranks that have
      // more are certain: everything unsent ranks below its rank's last.
      Candidate bound = kNone;
      for (int r = 0; r < s.exchange.size(); ++r)
        if (sizes[r] > static_cast<int64_t>(m) && better(all[r * m + m - 1], bound)) bound = all[r * m + m - 1];
      std::sort(all.begin(), all.end(), better);
      size_t certain = 0;
      while (certain < all.size() && all[certain].id != INT32_MAX && !better(bound, all[certain])) ++certain;
      cand.assign(all.begin(), all.begin() + certain);
      prob.clear();
      for (const Candidate& x : cand) prob.push_back(weight(x.logit));
      double acc = 0;
      bool done = false;
      for (size_t i = 0; i < certain && !done; ++i) done = cut(i, acc);
      if (done) break;
      if (bound.id == INT32_MAX) {  // every rank sent everything
        keep = certain;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += prob[i];
  double r = u * kept;
  for (size_t i = 0; i < keep; ++i)
    if ((r -= prob[i]) < 0) return cand[i].id;
  return cand[keep - 1].id;
}

int32_t Sampler::sample(std::span<const float> logits) {
  Exchange solo;
  return sample(SplitLogits{logits, 0, static_cast<int64_t>(logits.size()), solo});
}

int32_t argmax(const SplitLogits& s) { return best(s).id; }

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<TokenLogprob> top_logprobs(const SplitLogits& s, int k) {
  const double lse = log_normalizer(s);
  std::vector<TokenLogprob> out;
  for (const Candidate& c : global_top(s, k)) out.push_back({c.id, static_cast<float>(c.logit - lse)});
  return out;
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k) {
  Exchange solo;
  return top_logprobs(SplitLogits{logits, 0, static_cast<int64_t>(logits.size()), solo}, k);
}

float logprob_of(const SplitLogits& s, int32_t id) {
  const double lse = log_normalizer(s);
  const int64_t i = id - s.begin;
  const float mine = i >= 0 && i < static_cast<int64_t>(s.logits.size()) ? s.logits[i] : -INFINITY;
  std::vector<float> all = gather(s.exchange, mine);
  return static_cast<float>(*std::max_element(all.begin(), all.end()) - lse);
}

float logprob_of(std::span<const float> logits, int32_t id) {
  Exchange solo;
  return logprob_of(SplitLogits{logits, 0, static_cast<int64_t>(logits.size()), solo}, id);
}

}  // namespace tps
