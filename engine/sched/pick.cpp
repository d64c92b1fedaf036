#include "engine/sched/pick.h"

#include <algorithm>

namespace tps {

SplitRows shard_rows(const Shard& s, int64_t vocab, std::span<const float> logits, size_t width, Exchange& together,
                     Exchange& alone) {
  if (s.mode == SplitMode::layers) return SplitRows{logits, width, 0, vocab, alone};
  return SplitRows{logits, width, s.share.vocab.begin, vocab, together};
}

std::vector<Pick> pick(const SplitRows& rows, std::span<const Draw> draws) {
  std::vector<Pick> picks;
  for (const Drawn& d : sample_rows(rows, draws)) {
    Pick& p = picks.emplace_back();
    p.id = d.id, p.logprob = d.logprob;
    for (const TokenLogprob& t : d.top)
      if (p.n_top < kMaxTopLogprobs) p.top[p.n_top++] = t;
  }
  return picks;
}

}  // namespace tps
