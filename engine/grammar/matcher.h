// One sequence's place in a grammar (grammar.h), token by token: which
// tokens may come next (a mask over the vocabulary) and taking the one
// chosen.
//
// The state is a set of stacks of grammar positions (a nondeterministic
// pushdown automaton: one stack per way the output so far can still parse),
// kept as nodes (position, loop automaton state, parent) interned in a table,
// so equal stacks are one node and a stack's closure -- the positions it can
// take a byte or a token at, through rule calls and returns -- is computed
// once per node. The mask of a state is its special tokens, the ordinary
// tokens a walk of the vocabulary's byte trie accepts from its stacks that
// are not in a loop (pruning every subtree at the first byte no stack takes),
// and for each stack in a loop the loop's precomputed inside set plus the
// tokens leaving it that the rest of the grammar takes (token_index.h). Masks
// are kept by state, so the steps of a long string or of free text, whose
// state repeats, are a copy.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/token_index.h"

namespace tps {

// A grammar ready to constrain sequences of one vocabulary, shared by every
// matcher that uses it (immutable).
struct CompiledGrammar {
  Grammar grammar;
  std::shared_ptr<const TokenIndex> index;
  std::vector<int32_t> end_tokens;  // what may follow once the grammar is matched whole
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // The tokens that may come next; empty only when the grammar cannot go on
  // (complete and no end tokens given).
  const TokenSet& allowed();
  // Takes a token: false, and nothing changed, when it may not come next.
  bool accept(int32_t token);
  // Whether accept(token) would take it (without taking it): what a sampler
  // asks of the token it drew before computing a whole mask.
  bool accepts(int32_t token);
  // The output so far is a whole match of the grammar.
  bool complete() const;

 private:
  static constexpr int32_t kAccept = 0;  // the node of a whole match
  struct Node {
    uint32_t pos;
    uint16_t state;  // a loop's automaton state
    int32_t parent;  // -1: the bottom of the stack
  };
  int32_t intern(uint32_t pos, uint16_t state, int32_t parent);
  const std::vector<int32_t>& closure(int32_t node);
  // out = the closed set after `byte` from set.
  void advance(const std::vector<int32_t>& set, uint8_t byte, std::vector<int32_t>& out);
  // Adds the ids of trie entries the set takes all the bytes of.
  void walk(const ByteTrie& trie, const std::vector<int32_t>& start, TokenSet& out);
  void compute_mask(TokenSet& out);
  // The state after token into next (empty: not allowed); true for an end
  // token once the match is whole (the state stays).
  bool step(int32_t token, std::vector<int32_t>& next);
  void collect_garbage();

  std::shared_ptr<const CompiledGrammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> ids_;
  std::vector<std::vector<int32_t>> closures_;  // by node; computed once
  std::vector<uint8_t> closed_;
  std::vector<int32_t> state_;              // the closed set of the output so far
  std::vector<std::vector<int32_t>> sets_;  // scratch: a walk's set per depth
  // Masks by state, most recent first.
  std::list<std::pair<std::vector<int32_t>, TokenSet>> masks_;
};

}  // namespace tps
