#include "engine/step/sampler.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "engine/step/gather_round.h"
#include "runtime/error.h"
#include "runtime/hash.h"
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

// Most likely first; ties: the lowest id. A lambda, so that the sorts
// inline it (a function pointer they call per comparison).
constexpr auto better = [](const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
};

// Every rank's part of the vocabulary, the same for every row: learned in the
// first round.
struct Parts {
  std::vector<int64_t> begin, size, chunks;  // by rank; chunks of kVocabGranule ids
  int64_t most = 0;                          // the most chunks a rank holds
  std::vector<int> order;                    // ranks in the order of their ids
};

Parts parts_of(const std::vector<int64_t>& begin_and_size) {
  Parts p;
  for (size_t r = 0; r < begin_and_size.size() / 2; ++r) {
    p.begin.push_back(begin_and_size[2 * r]), p.size.push_back(begin_and_size[2 * r + 1]);
    p.chunks.push_back((p.size.back() + kVocabGranule - 1) / kVocabGranule);
    p.most = std::max(p.most, p.chunks.back());
    p.order.push_back(static_cast<int>(r));
  }
  std::sort(p.order.begin(), p.order.end(), [&](int a, int b) { return p.begin[a] < p.begin[b]; });
  return p;
}

enum class Way {
  greedy,
  unfiltered,  // temperature alone: the chunk the draw falls in, then the token in it
  top_k,       // the top k of all ranks, then top-p and min-p among them
  nucleus,     // top-p or min-p over the whole vocabulary
};

// A row through the rounds: its logits on this rank, what it asks, and what
// the rounds told it so far.
struct Row {
  std::span<const float> logits;
  int64_t begin = 0;
  SamplerParams p;
  Way way = Way::greedy;
  int alternatives = 0;
  double u = 0;            // the draw
  double inv_t = 1;        // 1 / temperature
  Candidate best = kNone;  // of all ranks
  size_t m = 0;            // candidates each rank sends this round
  size_t at_sums = 0, at_top = 0, at_plain = 0, at_alternatives = 0, at_found = 0;
  std::vector<Candidate> cand;  // survivors, most likely first ...
  std::vector<double> prob;     // ... and their weights (prob[0] the best's)
  double total = 0;             // the weights' sum over the vocabulary
  size_t keep = 0;              // survivors kept after top-p and min-p
  size_t chunk = 0;             // unfiltered: the chunk the draw falls in ...
  double rest = 0;              // ... and what is left of the draw at its start
  bool open = false;            // needs another round
  Candidate chosen = kNone;
  double log_sum = 0;  // with alternatives: log of the sum of exp(logit)
  std::vector<Candidate> top;

  double weight(float l) const { return std::exp((l - static_cast<double>(best.logit)) * inv_t); }
  double plain(float l) const { return std::exp(l - static_cast<double>(best.logit)); }
  Candidate at(size_t i) const { return {logits[i], static_cast<int32_t>(begin + static_cast<int64_t>(i))}; }
};

Row start(const SplitRows& s, size_t i, const Draw& d) {
  Row r;
  r.logits = s.logits.subspan(i * s.width, s.width);
  r.begin = s.begin;
  r.alternatives = d.alternatives;
  if (!d.sampler || d.sampler->params().temperature == 0) return r;
  r.p = d.sampler->params();
  r.inv_t = 1.0 / r.p.temperature;
  r.u = d.sampler->uniform();
  // top-k keeps every token when k reaches the vocabulary: no top-k, so
  // that it costs no sort of the whole vocabulary every token.
  if (r.p.top_k >= s.vocab) r.p.top_k = 0;
  r.way = r.p.top_k > 0 ? Way::top_k : r.p.top_p == 1 && r.p.min_p == 0 ? Way::unfiltered : Way::nucleus;
  return r;
}

Candidate local_best(const Row& r) {
  Candidate mine = kNone;
  for (size_t i = 0; i < r.logits.size(); ++i)
    if (r.logits[i] > mine.logit) mine = r.at(i);
  return mine;
}

// This rank's best m candidates, best first, padded with kNone to m.
std::vector<Candidate> local_top(const Row& r, size_t m) {
  std::vector<Candidate> c(r.logits.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = r.at(i);
  // Selection, then a sort of the selected: O(size + m log m), where a
  // partial sort's heap costs O(size log m) once m is large (a flat
  // distribution's later rounds ask for thousands).
  const size_t n = std::min(m, c.size());
  std::nth_element(c.begin(), c.begin() + n - (n > 0), c.end(), better);
  std::sort(c.begin(), c.begin() + n, better);
  c.resize(m, kNone);
  return c;
}

// Every rank's best m, merged: the best m of all.
std::vector<Candidate> merged_top(std::vector<Candidate> all, size_t m) {
  std::sort(all.begin(), all.end(), better);
  all.resize(m);
  return all;
}

// This rank's sums of weight(logit) per chunk of kVocabGranule ids, padded
// to the most chunks a rank holds.
template <typename Weight>
std::vector<double> local_sums(const Row& r, const Parts& parts, Weight weight) {
  const int64_t n = static_cast<int64_t>(r.logits.size());
  std::vector<double> mine(parts.most, 0.0);
  for (int64_t c = 0; c * kVocabGranule < n; ++c)
    for (int64_t i = c * kVocabGranule; i < std::min(n, (c + 1) * kVocabGranule); ++i) mine[c] += weight(r.logits[i]);
  return mine;
}

// Every chunk's sum in id order, from every rank's local_sums.
std::vector<double> in_id_order(const std::vector<double>& all, const Parts& parts) {
  std::vector<double> out;
  for (int r : parts.order)
    out.insert(out.end(), all.begin() + r * parts.most, all.begin() + r * parts.most + parts.chunks[r]);
  return out;
}

double in_order_sum(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return total;
}

// How many of the first n survivors top-p and min-p keep; 0 when the list
// does not end among them.
size_t cut(const Row& r, size_t n) {
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && r.prob[i] < r.p.min_p * r.prob[0]) return i;
    acc += r.prob[i] / r.total;
    if (r.p.top_p < 1 && acc >= r.p.top_p) return i + 1;
  }
  return 0;
}

// The draw among the kept survivors, by their weights.
Candidate draw(const Row& r) {
  double kept = 0;
  for (size_t i = 0; i < r.keep; ++i) kept += r.prob[i];
  double x = r.u * kept;
  for (size_t i = 0; i < r.keep; ++i)
    if ((x -= r.prob[i]) < 0) return r.cand[i];
  return r.cand[r.keep - 1];
}

// Nucleus: each rank sent its best m. Candidates up to the best of the last
// ones sent by ranks that have more are certain: everything unsent ranks
// below its rank's last. Chooses when the cut falls among them.
void settle(Row& r, std::vector<Candidate> all, const Parts& parts) {
  const size_t m = r.m;
  Candidate bound = kNone;
  for (size_t q = 0; q < parts.size.size(); ++q)
    if (parts.size[q] > static_cast<int64_t>(m) && better(all[q * m + m - 1], bound)) bound = all[q * m + m - 1];
  std::sort(all.begin(), all.end(), better);
  size_t certain = 0;
  while (certain < all.size() && all[certain].id != INT32_MAX && !better(bound, all[certain])) ++certain;
  r.cand.assign(all.begin(), all.begin() + certain);
  r.prob.clear();
  for (const Candidate& x : r.cand) r.prob.push_back(r.weight(x.logit));
  r.keep = cut(r, certain);
  if (r.keep == 0 && bound.id == INT32_MAX) r.keep = certain;  // every rank sent everything
  r.open = r.keep == 0;
  if (r.open)
    r.m *= 4;
  else
    r.chosen = draw(r);
}

// Round 2: what needs the best -- the sums -- and the candidates.
void put_second(Row& r, const Parts& parts, int64_t vocab, GatherRound& round) {
  if (r.way == Way::unfiltered || r.way == Way::nucleus)
    r.at_sums = round.put<double>(local_sums(r, parts, [&](float l) { return r.weight(l); }));
  if (r.way == Way::top_k || r.way == Way::nucleus) {
    // No rank sends more than the vocabulary (--top-k 1000000000 would
    // gather 8 GB of padding a token).
    r.m = r.way == Way::top_k ? std::min<size_t>(r.p.top_k, vocab) : 64;
    r.at_top = round.put<Candidate>(local_top(r, r.m));
  }
  if (r.alternatives > 0) {
    r.at_plain = round.put<double>(local_sums(r, parts, [&](float l) { return r.plain(l); }));
    r.at_alternatives = round.put<Candidate>(local_top(r, std::min<size_t>(r.alternatives, vocab)));
  }
}

void take_second(Row& r, const Parts& parts, int64_t vocab, const GatherRound& round) {
  if (r.alternatives > 0) {
    const size_t m = std::min<size_t>(r.alternatives, vocab);
    r.log_sum = r.best.logit + std::log(in_order_sum(in_id_order(round.all<double>(r.at_plain, parts.most), parts)));
    r.top = merged_top(round.all<Candidate>(r.at_alternatives, m), m);
  }
  switch (r.way) {
    case Way::greedy: r.chosen = r.best; break;
    case Way::unfiltered: {
      const std::vector<double> chunks = in_id_order(round.all<double>(r.at_sums, parts.most), parts);
      r.rest = r.u * in_order_sum(chunks);
      for (r.chunk = 0; r.chunk + 1 < chunks.size() && r.rest >= chunks[r.chunk]; ++r.chunk) r.rest -= chunks[r.chunk];
      r.open = true;  // the chunk's owner finds the token
      break;
    }
    case Way::top_k: {
      // The top k of all ranks, normalised among themselves.
      r.cand = merged_top(round.all<Candidate>(r.at_top, r.m), r.m);
      for (const Candidate& x : r.cand) r.total += r.prob.emplace_back(r.weight(x.logit));
      r.keep = cut(r, r.cand.size());
      if (r.keep == 0) r.keep = r.cand.size();
      r.chosen = draw(r);
      break;
    }
    case Way::nucleus:
      r.total = in_order_sum(in_id_order(round.all<double>(r.at_sums, parts.most), parts));
      settle(r, round.all<Candidate>(r.at_top, r.m), parts);
      break;
  }
}

// The token of the unfiltered draw, on the rank that holds its chunk.
Candidate found(Row& r) {
  const int64_t first = static_cast<int64_t>(r.chunk) * kVocabGranule - r.begin;
  const int64_t n = static_cast<int64_t>(r.logits.size());
  if (first < 0 || first >= n) return {-INFINITY, -1};
  const int64_t end = std::min(n, first + kVocabGranule);
  for (int64_t i = first; i < end; ++i)
    if ((r.rest -= r.weight(r.logits[i])) < 0) return r.at(i);
  return r.at(end - 1);  // if rounding leaves some of the draw
}

// Rounds 3 and on: the owner's token of an unfiltered draw; more of each
// rank's candidates while a nucleus is not settled.
void put_more(Row& r, GatherRound& round) {
  if (r.way == Way::unfiltered)
    r.at_found = round.put(found(r));
  else
    r.at_top = round.put<Candidate>(local_top(r, r.m));
}

void take_more(Row& r, const Parts& parts, const GatherRound& round) {
  if (r.way == Way::nucleus) {
    settle(r, round.all<Candidate>(r.at_top, r.m), parts);
  } else {  // the owner's is the one with an id
    const std::vector<Candidate> all = round.all<Candidate>(r.at_found, 1);
    r.chosen =
        *std::max_element(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
    r.open = false;
  }
}

Drawn drawn(const Row& r) {
  Drawn d{r.chosen.id, 0, {}, r.log_sum};
  if (r.alternatives == 0) return d;
  d.logprob = static_cast<float>(r.chosen.logit - r.log_sum);
  for (const Candidate& c : r.top) d.top.push_back({c.id, static_cast<float>(c.logit - r.log_sum)});
  return d;
}

SplitRows one_row(const SplitLogits& s) { return SplitRows{s.logits, s.logits.size(), s.begin, s.vocab, s.exchange}; }

}  // namespace

std::vector<Drawn> sample_rows(const SplitRows& s, std::span<const Draw> draws) {
  if (draws.empty()) return {};
  std::vector<Row> rows;
  for (size_t i = 0; i < draws.size(); ++i) rows.push_back(start(s, i, draws[i]));
  // Round 1: the ranks' parts of the vocabulary and each row's best.
  GatherRound first;
  const int64_t mine[2] = {s.begin, static_cast<int64_t>(s.width)};
  const size_t at_parts = first.put<int64_t>(mine);
  std::vector<size_t> at_best;
  for (const Row& r : rows) at_best.push_back(first.put(local_best(r)));
  first.run(s.exchange);
  const Parts parts = parts_of(first.all<int64_t>(at_parts, 2));
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<Candidate> all = first.all<Candidate>(at_best[i], 1);
    rows[i].best = *std::min_element(all.begin(), all.end(), better);
  }
  // Round 2, and more while a row needs them.
  GatherRound second;
  for (Row& r : rows) put_second(r, parts, s.vocab, second);
  if (!second.empty()) second.run(s.exchange);
  for (Row& r : rows) take_second(r, parts, s.vocab, second);
  for (;;) {
    GatherRound more;
    for (Row& r : rows)
      if (r.open) put_more(r, more);
    if (more.empty()) break;
    more.run(s.exchange);
    for (Row& r : rows)
      if (r.open) take_more(r, parts, more);
  }
  std::vector<Drawn> out;
  for (const Row& r : rows) out.push_back(drawn(r));
  return out;
}

Sampler::Sampler(const SamplerParams& params) : p_(params), state_(params.seed) { validate(params); }

double Sampler::uniform() { return static_cast<double>(splitmix64(state_) >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(const SplitLogits& s) {
  const Draw d{this, 0};
  return sample_rows(one_row(s), {&d, 1})[0].id;
}

int32_t Sampler::sample(std::span<const float> logits) {
  Exchange solo;
  return sample(SplitLogits{logits, 0, static_cast<int64_t>(logits.size()), solo});
}

int32_t argmax(const SplitLogits& s) {
  const Draw d;
  return sample_rows(one_row(s), {&d, 1})[0].id;
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<TokenLogprob> top_logprobs(const SplitLogits& s, int k) {
  if (k <= 0) return {};
  const Draw d{nullptr, k};
  return sample_rows(one_row(s), {&d, 1})[0].top;
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k) {
  Exchange solo;
  return top_logprobs(SplitLogits{logits, 0, static_cast<int64_t>(logits.size()), solo}, k);
}

float logprob_of(const SplitLogits& s, int32_t id) {
  const Draw d{nullptr, 1};
  const double log_sum = sample_rows(one_row(s), {&d, 1})[0].log_sum;
  const int64_t i = id - s.begin;
  const float mine = i >= 0 && i < static_cast<int64_t>(s.logits.size()) ? s.logits[i] : -INFINITY;
  std::vector<float> all(s.exchange.size());
  s.exchange.all_gather(&mine, all.data(), sizeof mine);
  return static_cast<float>(*std::max_element(all.begin(), all.end()) - log_sum);
}

float logprob_of(std::span<const float> logits, int32_t id) {
  Exchange solo;
  return logprob_of(SplitLogits{logits, 0, static_cast<int64_t>(logits.size()), solo}, id);
}

}  // namespace tps
