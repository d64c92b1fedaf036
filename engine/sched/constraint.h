// A sequence's output held to a grammar (engine/grammar) as generation
// samples it. Its spec (constraint_spec.h) travels in a step's plan to
// every rank that samples, each of which compiles it (a cache keyed by the
// spec's text) and follows the sequence with a matcher of its own, so
// every rank masks the same tokens from the same picks.
//
// A spec is compiled once per rank and, as a rule, never inside a step:
// rank 0 compiles it where the request is checked (a server's request
// thread, tpsrun's start), and announces it in the plan after the sequence
// is added; the other ranks compile it then, on a thread of the cache,
// while the steps go on, and the sequence joins once four times rank 0's
// compile time has passed (Generator::next_step; a rank whose compile is
// not done by then makes that step wait for it).
//
// Masks are applied to each rank's rows of the vocabulary before the
// sampler sees them, so sampling stays split across ranks. The analysis of
// a harmony turn is closed (only <|end|> allowed) once it has spent its
// budget in tokens (analysis_budget: the reasoning budget, cut so that the
// answer has room in the sequence's max_new_tokens).
#pragma once

#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "engine/grammar/matcher.h"
#include "engine/sched/constraint_spec.h"
#include "engine/text/tokenizer.h"

namespace tps {

// Compiled constraint specs by their text (the least recently used dropped
// past a count), over one tokenizer's index. Thread-safe: a server checks
// specs on its request threads; a spec asked for while another thread
// compiles it is waited for, not compiled twice.
class ConstraintCache {
 public:
  using Compiled = std::shared_ptr<const CompiledConstraint>;
  explicit ConstraintCache(const Tokenizer& tokenizer);
  // The spec compiled, on the calling thread unless it is or was already;
  // ConstraintError naming what cannot be held.
  Compiled get(const ConstraintSpec& spec);
  // The spec (its text) compiling on a thread of its own, or compiled.
  std::shared_future<Compiled> start(const std::string& text);
  const Tokenizer& tokenizer() const { return tok_; }

 private:
  // The spec's entry, found, or new and `fresh`'s (then true: the caller
  // compiles it).
  std::pair<std::shared_future<Compiled>, bool> entry(const std::string& text, std::promise<Compiled>& fresh);
  void compile(const ConstraintSpec& spec, const std::string& text, std::promise<Compiled>& promise);
  void forget(const std::string& text);

  const Tokenizer& tok_;
  std::shared_ptr<const TokenIndex> index_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_future<Compiled>>> compiled_;  // most recent first
  std::list<std::future<void>> threads_;                                      // start()'s, joined at the end
};

class SequenceConstraint {
 public:
  // max_new_tokens: the sequence's. The constraint must hold something
  // (a grammar).
  SequenceConstraint(const CompiledConstraint& compiled, const Tokenizer& tokenizer, int max_new_tokens);
  // logits holds the rows [begin, begin + logits.size()) of the
  // vocabulary: those the grammar does not allow now become -inf. False
  // when it allows no token at all.
  bool mask(std::span<float> logits, int64_t begin);
  // The token picked (every rank the same): false if the grammar refuses it.
  bool accept(int32_t token);
  bool complete() const { return matcher_.complete(); }

 private:
  Matcher matcher_;
  const Tokenizer* tok_;
  int budget_;
  // The analysis channel, followed by its tokens: -1 outside it.
  std::string channel_;
  int in_header_ = 0;  // 1 after <|channel|> until <|message|>
  int analysis_tokens_ = -1;
  int32_t end_, channel_id_, message_;
};

// The reasoning budget of an effort: low 512, medium 2048, high 8192 tokens.
int effort_budget(const std::string& effort);

// The tokens of the analysis message besides its text: <|channel|>analysis
// <|message|> before, <|end|><|start|>assistant after (one token a word).
constexpr int kAnalysisFraming = 6;

// The analysis a constrained harmony turn may spend before it is closed,
// of a sequence that may generate max_new_tokens: the reasoning budget, at
// most half of max_new_tokens, and at most what leaves room for the
// shortest answer the turn allows (answer_tokens; a tool call forced by
// tool_choice is one) after the analysis's framing -- so that a forced call
// whose arguments fit what is left is always made. 0: the analysis, if
// begun, ends at once.
int analysis_budget(int reasoning_budget, int max_new_tokens, int64_t answer_tokens);

}  // namespace tps
