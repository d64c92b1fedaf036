#include "engine/sched/pick.h"

#include <algorithm>

namespace tps {

SplitLogits shard_logits(const Shard& s, int64_t vocab, std::span<const float> logits, Exchange& together,
                         Exchange& alone) {
  if (s.mode == SplitMode::layers) return SplitLogits{logits, 0, vocab, alone};
  return SplitLogits{logits, s.share.vocab.begin, vocab, together};
}

Pick pick(const SplitLogits& logits, Sampler& sampler, int alternatives) {
  Pick p;
  p.id = sampler.sample(logits);
  if (alternatives > 0) {
    p.logprob = logprob_of(logits, p.id);
    for (const TokenLogprob& t : top_logprobs(logits, std::min(alternatives, kMaxTopLogprobs))) p.top[p.n_top++] = t;
  }
  return p;
}

}  // namespace tps
