// One sequence's place in a grammar (grammar.h), token by token: which
// tokens may come next (a mask over the vocabulary) and taking the one
// chosen.
//
// The state is a set of stacks of grammar positions (a nondeterministic
// pushdown automaton: one stack per way the output so far can still parse),
// kept as nodes (position, loop state, parent) interned in a table,
// so equal stacks are one node and a stack's closure -- the positions it can
// take a byte or a token at, through rule calls and returns -- is computed
// once per node; sets of nodes are interned too, and a walk's step from a
// set on a byte is computed once (a lazily built automaton over the
// matcher's states), so a trie walk costs a table lookup per node where it
// repeats itself. The mask of a state is its special tokens, the ordinary
// tokens a walk of the vocabulary's byte trie accepts from its stacks that
// are not in a loop (pruning every subtree at the first byte no stack takes),
// and for each stack in a loop the loop's precomputed inside set plus the
// tokens leaving it that the rest of the grammar takes (token_index.h). Masks
// are kept by state, so the steps of a long string or of free text, whose
// state repeats, are a copy.
//
// What a token costs is bounded: the matcher counts its work (stack nodes
// stepped, closed or walked) and gives up on a mask or a step past a limit,
// so no grammar -- a repetition of something that can match in many ways,
// an enum of a hundred thousand strings -- holds a step for long. Work is
// counted, not timed, so every rank that follows a sequence gives up at
// the same token.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/token_index.h"
#include "runtime/error.h"

namespace tps {

// A token's mask or step that needs more work than a Matcher's limit; the
// message names where in the request the costly rules came from.
class GrammarTooCostly : public InputError {
 public:
  GrammarTooCostly(const std::string& origin, uint64_t limit);
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

// A grammar ready to constrain sequences of one vocabulary, shared by every
// matcher that uses it (immutable).
struct CompiledGrammar {
  Grammar grammar;
  std::shared_ptr<const TokenIndex> index;  // null for a matcher only asked matches()
  std::vector<int32_t> end_tokens;          // what may follow once the grammar is matched whole
};

// Finishes g (Grammar::finish) from `start` and builds what its masks
// need: the tables of every loop automaton's states (token_index.h; kept
// for every later grammar), so a first mask costs what a later one does.
// Throws InputError as finish does.
// Then follows a few tokens from its start and from each of its probes
// (Grammar::add_probe): GrammarTooCostly when a mask there passes the
// matcher's work limit, before any step could wait on it.
std::shared_ptr<const CompiledGrammar> compile_grammar(Grammar g, int start, std::shared_ptr<const TokenIndex> index,
                                                       std::vector<int32_t> end_tokens);

class Matcher {
 public:
  // The work one token's mask or step may take: about 0.1 s of one core
  // (78 M steps a second measured on Zen 5); the heaviest mask of the JSON
  // Schema test suite's schemas takes 0.63 M (tests/grammar_test.cpp).
  static constexpr uint64_t kWorkPerToken = 8'000'000;

  // start: the rule it matches (-1: the grammar's start).
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar, uint64_t work_per_token = kWorkPerToken,
                   int start = -1);

  // The tokens that may come next; empty only when the grammar cannot go on
  // (complete and no end tokens given). Throws GrammarTooCostly past the
  // work limit (nothing changed: the matcher stays usable).
  const TokenSet& allowed();
  // Takes a token: false, and nothing changed, when it may not come next.
  // Throws GrammarTooCostly as allowed() does.
  bool accept(int32_t token);
  // Whether accept(token) would take it (without taking it): what a sampler
  // asks of the token it drew before computing a whole mask.
  bool accepts(int32_t token);
  // The output so far is a whole match of the grammar.
  bool complete() const;
  // Whether the output so far followed by the bytes of text is a whole
  // match (nothing changes). Throws GrammarTooCostly past the work limit.
  bool matches(std::string_view text);
  // The work the last mask computed or step taken counted.
  uint64_t work() const { return work_; }

 private:
  static constexpr int32_t kAccept = 0;  // the node of a whole match
  struct Node {
    uint32_t pos;
    uint32_t state;  // a loop's: its automaton's state + states x the words ended
    int32_t parent;  // -1: the bottom of the stack
    bool operator==(const Node&) const = default;
  };
  struct NodeHash {
    size_t operator()(const Node& n) const {
      return (uint64_t{n.pos} * 0x9E3779B97F4A7C15ull) ^ (uint64_t{n.state} << 20) ^ static_cast<uint32_t>(n.parent);
    }
  };
  int32_t intern(uint32_t pos, uint32_t state, int32_t parent);
  const std::vector<int32_t>& closure(int32_t node);
  // out = the closed set after `byte` from set (sorted).
  void advance(const std::vector<int32_t>& set, uint8_t byte, std::vector<int32_t>& out);
  // Interned sets: an id for a sorted set (-1 for the empty one), and the
  // id after a byte, memoized.
  int32_t set_id(const std::vector<int32_t>& set);
  int32_t next_set(int32_t set, uint8_t byte);
  // Calls take(id) for the trie entries the set takes all the bytes of.
  template <typename Take>
  void walk(const ByteTrie& trie, const std::vector<int32_t>& start, Take take);
  void compute_mask(TokenSet& out);
  // The state after token into next (empty: not allowed); true for an end
  // token once the match is whole (the state stays).
  bool step(int32_t token, std::vector<int32_t>& next);
  void collect_garbage();
  // Counts work; past the limit, throws GrammarTooCostly naming the origin
  // of most of the widest set's stacks.
  void spend(uint64_t units) {
    if ((work_ += units) > limit_) too_costly();
  }
  [[noreturn]] void too_costly() const;
  // Whether node n is met for the first time since the stamp last moved
  // (closure's and advance's own, which nest).
  static bool first_visit(std::vector<uint32_t>& seen, uint32_t stamp, int32_t n) {
    if (static_cast<size_t>(n) >= seen.size()) seen.resize(static_cast<size_t>(n) + 1024, 0);
    if (seen[n] == stamp) return false;
    seen[n] = stamp;
    return true;
  }

  std::shared_ptr<const CompiledGrammar> g_;
  uint64_t limit_, work_ = 0;
  std::vector<uint32_t> closure_seen_, advance_seen_;
  uint32_t closure_stamp_ = 0, advance_stamp_ = 0;
  std::vector<Node> nodes_;
  std::unordered_map<Node, int32_t, NodeHash> ids_;
  std::vector<std::vector<int32_t>> closures_;  // by node; computed once
  std::vector<uint8_t> closed_;
  std::vector<int32_t> state_;  // the closed set of the output so far
  struct SetHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      size_t h = v.size();
      for (int32_t x : v) h = h * 0x100000001B3ull ^ static_cast<uint32_t>(x);
      return h;
    }
  };
  std::vector<std::vector<int32_t>> sets_;
  std::unordered_map<std::vector<int32_t>, int32_t, SetHash> set_ids_;
  std::unordered_map<uint64_t, int32_t> next_sets_;  // (set << 8 | byte) -> set
  std::vector<int32_t> walk_sets_;                   // scratch: a walk's set per depth
  // Masks by state, most recent first.
  std::list<std::pair<std::vector<int32_t>, TokenSet>> masks_;
};

}  // namespace tps
