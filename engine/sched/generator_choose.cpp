// Generator::choose: the sampling ranks' picks of a step's tokens -- each
// row masked by its sequence's constraint, drafts checked row by row --
// apart from the step loop (generator.cpp).
#include <optional>

#include "engine/sched/generator.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace tps {

// The rows of a draft (an entry that wants every row's logits) are drawn
// as plain decoding would draw them one step at a time: row i with the
// sequence's sampler as it would stand after i draws (a draw takes one
// number from it, none when greedy). Rows are taken while each row's token
// is the draft's next one; the sampler then stands where it would after
// drawing the rows taken. So the tokens -- and with a seed, the draws --
// are those of decoding without a draft.
std::vector<Generator::Chosen> Generator::choose(const Batch& batch) {
  const int64_t width = pass_.vocab_rows();
  std::vector<int32_t> seqs;
  std::vector<Draw> draws;
  std::vector<Sampler> drafted;  // a draft's rows' samplers
  drafted.reserve(batch.logit_rows());
  for (const BatchEntry& e : batch.entries) {
    Sampled& q = sampled_.at(e.seq);
    Sampler& own = q.sampler;
    for (int i = 0; i < e.logits; ++i) {
      Sampler* sampler = &own;
      if (e.logits > 1) {
        sampler = &drafted.emplace_back(i == 0 ? own : drafted.back());
        if (i > 0 && sampler->params().temperature > 0) sampler->uniform();
      }
      seqs.push_back(e.seq);
      draws.push_back(Draw{sampler, q.alternatives});
    }
  }
  // A constraint that gives up (its work for a token past the matcher's
  // limit) ends its sequence without a token; its row is still drawn from,
  // unmasked, so that every rank takes part in the same draws. Work is
  // counted, not timed: every sampling rank gives up at the same token.
  std::vector<uint8_t> gave_up(seqs.size(), 0);
  auto give_up = [&](size_t i, const GrammarTooCostly& e) {
    gave_up[i] = 1;
    log_warn("sequence ", seqs[i], ": its constraint gave up: ", e.what());
  };
  // A draft's row i is masked by the constraint as it would stand after the
  // draft's first i tokens (a copy followed through them). A row it cannot
  // mask -- past a drafted token it refuses, allows nothing after, or would
  // give up on -- is cut: the draft ends before it, so the next step meets
  // that state as plain decoding would (or the sequence ended first: a stop
  // token the grammar allows nothing after).
  std::vector<uint8_t> cut(seqs.size(), 0);
  for (size_t i = 0; const BatchEntry& e : batch.entries) {
    std::optional<SequenceConstraint>& c = sampled_.at(e.seq).constraint;
    if (!c) {
      i += e.logits;
      continue;
    }
    std::optional<SequenceConstraint> ahead;
    if (e.logits > 1) ahead.emplace(*c);
    bool reachable = true;
    for (int row = 0; row < e.logits; ++row, ++i) {
      const std::span<float> logits(logits_.data() + i * width, static_cast<size_t>(width));
      try {
        if (row > 0) reachable = reachable && ahead->accept(batch.tokens[e.first + row]);
        if (reachable && !(row == 0 ? *c : *ahead).mask(logits, model_.shard.share.vocab.begin)) {
          if (row == 0) throw Error(cat("sequence ", e.seq, ": its constraint allows no next token"));
          reachable = false;
        }
      } catch (const GrammarTooCostly& x) {
        if (row == 0) give_up(i, x);
        reachable = false;
      }
      cut[i] = row > 0 && !reachable;
    }
  }
  const std::span<const float> rows(logits_.data(), seqs.size() * width);
  std::vector<Pick> picks =
      pick(shard_rows(model_.shard, model_.config.n_vocab, rows, width, exchange_, alone_), draws);
  std::vector<Chosen> chosen;
  size_t i = 0;
  for (size_t d = 0; const BatchEntry& e : batch.entries) {
    const size_t first = i, first_drafted = d, before = chosen.size();
    if (e.logits > 1) d += e.logits;
    Sampled& q = sampled_.at(e.seq);
    for (int row = 0; row < e.logits; ++row, ++i) {
      try {
        if (!gave_up[i] && q.constraint && !q.constraint->accept(picks[i].id))
          throw Error(cat("sequence ", seqs[i], ": its constraint refused the token it allowed (", picks[i].id, ")"));
      } catch (const GrammarTooCostly& e) {
        give_up(i, e);
      }
      if (gave_up[i]) picks[i] = Pick{};
      if (q.next_forced + row < q.forced.size()) picks[i].id = q.forced[q.next_forced + row];
      chosen.push_back(Chosen{e.seq, picks[i]});
      if (e.logits > 1 && (row + 1 == e.logits || picks[i].id != batch.tokens[e.first + row + 1] || cut[i + 1])) {
        q.sampler = drafted[first_drafted + row];  // this row's, after its draw
        i = first + e.logits;
        break;
      }
    }
    q.next_forced += chosen.size() - before;
  }
  return chosen;
}

}  // namespace tps
