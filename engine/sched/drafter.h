// Draft tokens for speculative decoding without a second model: prompt
// lookup. The latest earlier occurrence of a sequence's last kMatch tokens
// proposes what followed it there -- in the sequence's own text first (an
// agent's patch repeats the lines of the file it read, a tool call quotes
// paths from earlier turns), else in the texts of the sequences that ended
// before it (DraftCorpus: a request that repeats an earlier one, an agent's
// turns that redo a step). Between the two, texts the sequence's prompt
// quotes in another form (add_source: a tool's output JSON-escaped, as a
// call's arguments write it back). The generator checks a draft in one step
// (engine/sched/generator.h) and keeps exactly the tokens plain decoding
// would have chosen, so a draft costs only time: text that repeats nothing
// finds no match and drafts nothing.
//
// How much of a proposal is drafted comes from cost (draft_length): a
// verify step costs more with every token it checks (its experts, its
// logits: on 20b-4l half a decode step each), so a draft is as long as the
// expected tokens per unit of step time say, from the chance each drafted
// token is taken -- the longer the match behind the proposal, the likelier
// it goes on (a copy of a span continues), and the sequence's own record of
// taken drafts.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/text/tokenizer.h"

namespace tps {

// A proposal: tokens, and how many tokens before it matched (at least kMatch).
struct Proposal {
  std::vector<int32_t> tokens;
  int matched = 0;
};

// The texts of ended sequences, back to back, up to a number of tokens
// (the oldest half goes when it is full), indexed by every kMatch tokens.
// Memory: 4 bytes a token and one index entry (about 40 bytes) per token.
class DraftCorpus {
 public:
  explicit DraftCorpus(int64_t most_tokens = 0) : most_(most_tokens) {}
  void add(std::span<const int32_t> text);
  // Up to `most` tokens that followed the latest occurrence of `tokens`'
  // last kMatch tokens in the corpus, to the end of that text.
  Proposal follow(std::span<const int32_t> tokens, int most) const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  void index_from(size_t at);
  int64_t most_;
  std::vector<int32_t> tokens_;                  // texts, each followed by -1
  std::unordered_map<uint64_t, int64_t> after_;  // kMatch tokens -> the position after their latest occurrence
};

// The draft length, of at most `most`, with the most expected tokens per
// unit of step time: a step checking k drafted tokens costs 1 + k x
// `token_cost` decode steps and gives 1 + a + ... + a^k tokens when each is
// taken with chance `a`. 0: drafting does not pay.
int draft_length(double a, double token_cost, int most);

// A least-squares line through steps' (tokens, seconds), each step's weight
// decaying: what a step costs, fixed and per token (the generator fits its
// decode steps; draft_length's token_cost is per_token over a step's).
struct StepCostFit {
  double w = 0, n = 0, t = 0, nn = 0, nt = 0;
  void add(double tokens, double seconds);
  // False until steps of several sizes were seen, or for a line that makes no sense.
  bool line(double& fixed, double& per_token) const;
};

class Drafter {
 public:
  static constexpr int kMatch = 3;     // tokens a match needs
  static constexpr int kLongest = 64;  // a draft's most tokens, and the longest match measured

  // Up to `most` tokens to follow `tokens` (the sequence so far; each call
  // passes the same sequence, longer or as long): what followed the latest
  // earlier occurrence of its last kMatch tokens, repeated with the period
  // of that match where it runs into the present; else what the corpus
  // (may be null) has. Empty when neither has a match.
  Proposal propose(std::span<const int32_t> tokens, int most, const DraftCorpus* corpus);
  // The chance the next drafted token is taken after a proposal with this
  // match: the sequence's record, or where that says more, the chance a
  // copy goes on after m tokens matched beyond the kMatch that found it,
  // m / (m + 1).
  double chance(int matched) const;
  // How a draft fared: `taken` of its `drafted` tokens were the model's.
  void verified(int drafted, int taken);
  // A text a proposal may also come from, after the sequence's own.
  void add_source(std::span<const int32_t> text) { sources_.add(text); }

  // kMatch tokens ending before `end` as one key.
  static uint64_t key_at(std::span<const int32_t> tokens, size_t end);
  // How many tokens before `a_end` and `b_end` are the same, up to kLongest.
  static int matched(std::span<const int32_t> a, size_t a_end, std::span<const int32_t> b, size_t b_end);

 private:
  std::unordered_map<uint64_t, int32_t> after_;  // kMatch tokens -> the position after their latest occurrence
  int indexed_ = 0;                              // occurrences ending before this position are in after_
  double taken_ = 0.5;  // the chance a drafted token is taken, from the sequence's drafts (a moving average)
  DraftCorpus sources_{kSourceTokens};
  static constexpr int64_t kSourceTokens = 1 << 20;  // bounds a sequence's sources (its prompt bounds them first)
};

// The long messages of a harmony prompt (a tool's output, a file pasted),
// JSON-escaped and tokenized, where escaping changed them: a tool call's
// arguments that write them back quote them so, and tokenize them
// otherwise. What a sequence's Drafter takes as sources (add_source).
std::vector<std::vector<int32_t>> escaped_messages(std::span<const int32_t> prompt, const Tokenizer& tokenizer);

}  // namespace tps
