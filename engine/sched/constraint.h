// A sequence's output held to a grammar (engine/grammar) as generation
// samples it: what a request's response format, strict tools or tool_choice
// ask, written as a constraint spec -- JSON text small enough to travel in
// a step's plan to every rank that samples, each of which compiles it (a
// cache keyed by the text) and follows the sequence with a matcher of its
// own, so every rank masks the same tokens from the same picks:
//
//   {"format": "json_schema", "schema": {...}}     the output is the schema's JSON
//   {"format": "json_object"}                      any JSON object
//   {"format": "gbnf", "gbnf": "root ::= ..."}     a hand-written grammar (gbnf.h)
//   {"format": "harmony", "analysis": true,        a harmony assistant turn
//    "reasoning_budget": 256,                      (engine/grammar/harmony_turn.h):
//    "final": "text" | "none" | {"schema": {...}} | {"json_object": true}
//             | {"gbnf": "..."},
//    "tools": [{"name": "f", "schema": {...} | null}]}
//
// Masks are applied to each rank's rows of the vocabulary before the
// sampler sees them, so sampling stays split across ranks. The analysis of
// a harmony turn is closed (only <|end|> allowed) once it has spent its
// budget in tokens (analysis_budget: the reasoning budget, cut so that the
// answer has room in the sequence's max_new_tokens).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "engine/grammar/matcher.h"
#include "engine/text/tokenizer.h"

namespace tps {

// Compiled constraint specs by their text (the least recently used dropped
// past a count), over one tokenizer's index. Thread-safe: a server
// validates specs on its request threads, the generation loop compiles
// them again from here.
class ConstraintCache {
 public:
  explicit ConstraintCache(const Tokenizer& tokenizer);
  // The spec compiled; InputError naming what it cannot honour.
  std::shared_ptr<const CompiledGrammar> get(const std::string& spec);
  const Tokenizer& tokenizer() const { return tok_; }

 private:
  const Tokenizer& tok_;
  std::shared_ptr<const TokenIndex> index_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> compiled_;  // most recent first
};

class SequenceConstraint {
 public:
  // reasoning_budget: the spec's (-1: none); max_new_tokens: the sequence's.
  SequenceConstraint(std::shared_ptr<const CompiledGrammar> grammar, const Tokenizer& tokenizer, int reasoning_budget,
                     int max_new_tokens);
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

// The reasoning budget of a spec (its "reasoning_budget", or -1: none).
int reasoning_budget(const std::string& spec);

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
