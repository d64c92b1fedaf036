// Picks the next token from logits: greedy, or temperature with top-k,
// top-p and min-p filters, from a seeded generator of our own (the bits and
// the arithmetic are ours, so a seed gives the same tokens on every
// platform and library version).
//
// Order: logits / temperature -> softmax -> top-k -> top-p -> min-p ->
// renormalise -> draw. temperature = 0 is greedy (ties: lowest id).
//
// The logits may be split across ranks by vocabulary rows (each rank holds
// the rows of its part of the output head). The ranks then exchange only
// what a choice needs -- maxima, per-chunk sums, each rank's best candidates
// -- never the whole vocabulary, and every rank gets the same answer. The
// sequences of a step are sampled together (sample_rows): each round of the
// exchange carries every sequence's part, so a step of 16 sequences costs
// the round trips of one. Sums
// over the vocabulary are taken per chunk of kVocabGranule ids and the
// chunks added in id order, and rank shares are whole chunks: the same
// arithmetic on 1 rank or 4, so a seed draws the same token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/exchange.h"

namespace tps {

struct SamplerParams {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0, or the vocabulary or more: off
  float top_p = 1.0f;        // (0, 1]; 1: off
  float min_p = 0.0f;        // [0, 1); 0: off
  uint64_t seed = 0;
};

// Throws InputError naming the parameter for values outside the ranges above.
void validate(const SamplerParams& params);

// This rank's logits: ids [begin, begin + logits.size()) of a vocabulary of
// `vocab`, begin a multiple of kVocabGranule; exchange joins the ranks that
// hold the other ids (collective: every one of them calls with its part).
struct SplitLogits {
  std::span<const float> logits;
  int64_t begin = 0;
  int64_t vocab = 0;
  Exchange& exchange;
};

// This rank's logits of several sequences, a row each: row i is
// logits[i * width, (i + 1) * width), ids [begin, begin + width) of each.
struct SplitRows {
  std::span<const float> logits;
  size_t width = 0;
  int64_t begin = 0;
  int64_t vocab = 0;
  Exchange& exchange;
};

struct TokenLogprob {
  int32_t id;
  float logprob;  // natural log of the softmax of the raw logits (temperature 1)
};

class Sampler;

// What a row asks for: a token from its sampler (none: the most likely), and
// with alternatives > 0 the token's log-probability and the `alternatives`
// most likely tokens (what --top-logprobs reports).
struct Draw {
  Sampler* sampler = nullptr;
  int alternatives = 0;
};
struct Drawn {
  int32_t id = -1;
  float logprob = 0;  // with alternatives > 0 only
  std::vector<TokenLogprob> top;
  double log_sum = 0;  // with alternatives > 0: log of the sum of exp(logit) over the vocabulary
};

// Collective over rows.exchange: every row's token, every rank the same
// ones, the same as each row sampled alone would give. One exchange per
// round for all rows: the best (1), the sums and candidates (2), and only
// when needed the owner of a drawn chunk's token or more candidates for
// top-p (3 ...).
std::vector<Drawn> sample_rows(const SplitRows& rows, std::span<const Draw> draws);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  int32_t sample(const SplitLogits& logits);
  int32_t sample(std::span<const float> logits);  // all of them on this rank

  const SamplerParams& params() const { return p_; }
  double uniform();  // the next draw, in [0, 1)

 private:
  SamplerParams p_;
  uint64_t state_;
};

// Index of the largest logit (lowest index on ties).
int32_t argmax(const SplitLogits& logits);
int32_t argmax(std::span<const float> logits);

// The k most likely tokens with their log-probabilities, most likely first
// (ties: lowest id), and the log-probability of any token: what
// --top-logprobs reports.
std::vector<TokenLogprob> top_logprobs(const SplitLogits& logits, int k);
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k);
float logprob_of(const SplitLogits& logits, int32_t id);
float logprob_of(std::span<const float> logits, int32_t id);

}  // namespace tps
