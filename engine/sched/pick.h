// Choosing a sequence's next token from the rank's logits: the sampler over
// logits split by vocabulary rows across the ranks (engine/step/sampler.h),
// and, when asked, the chosen token's log-probability and the most likely
// ones (what --top-logprobs and the API's logprobs report).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/weights.h"
#include "engine/step/sampler.h"
#include "runtime/exchange.h"

namespace tps {

// The most alternatives a Pick reports (a Pick travels between ranks as plain
// bytes, so its list has a fixed size).
constexpr int kMaxTopLogprobs = 100;

struct Pick {
  int32_t id = -1;    // -1: none, the sequence's constraint gave up (SequenceEnd::constraint)
  float logprob = 0;  // of id; with n_top > 0 only
  int32_t n_top = 0;
  TokenLogprob top[kMaxTopLogprobs];
};

// This rank's logits rows (of `width` each) as the sampler takes them:
// split inside layers, all ranks' vocabulary rows together (over
// `together`); a pipeline's last rank holds them all (and decides `alone`).
SplitRows shard_rows(const Shard& shard, int64_t vocab, std::span<const float> logits, size_t width, Exchange& together,
                     Exchange& alone);

// Collective over rows.exchange: every rank gets the same Picks, a row's
// each, chosen together (sample_rows).
std::vector<Pick> pick(const SplitRows& rows, std::span<const Draw> draws);

}  // namespace tps
