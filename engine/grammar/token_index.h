// What constrained decoding needs of a vocabulary, built once per tokenizer
// and shared by every grammar and sequence (and thread): each ordinary
// token's bytes in a trie, the special tokens apart, and, per loop automaton
// (grammar.h) and state, the tokens that stay inside the loop and where the
// others leave it -- computed on first use and kept, so that every JSON
// string or free text after the first costs a bitset copy and a walk of the
// few tokens that end it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/text/tokenizer.h"

namespace tps {

// A set of token ids: one bit each, in 64-bit words.
class TokenSet {
 public:
  explicit TokenSet(int32_t tokens = 0) : words_((tokens + 63) / 64, 0) {}
  void set(int32_t id) { words_[id >> 6] |= uint64_t{1} << (id & 63); }
  bool test(int32_t id) const { return words_[id >> 6] >> (id & 63) & 1; }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }
  TokenSet& operator|=(const TokenSet& o);
  int32_t count() const;
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  std::vector<uint64_t> words_;
};

// Byte strings in a trie, in preorder: node i's subtree is [i, end), its
// children follow it; a node lists the ids whose bytes end there.
struct ByteTrie {
  struct Node {
    uint8_t byte;      // the byte on the edge into it (the root's: none)
    uint16_t depth;    // bytes from the root
    uint32_t end;      // one past its subtree
    uint32_t ids = 0;  // [ids, ids_end) into ids_of
    uint32_t ids_end = 0;
  };
  std::vector<Node> nodes;
  std::vector<int32_t> ids_of;
  // Builds from (bytes, id) pairs; equal byte strings share a node.
  static ByteTrie build(std::vector<std::pair<std::string, int32_t>> entries);
};

class TokenIndex {
 public:
  explicit TokenIndex(const Tokenizer& tokenizer);
  int32_t vocab() const { return vocab_; }
  const ByteTrie& trie() const { return trie_; }
  const std::vector<int32_t>& specials() const { return specials_; }  // ascending
  const std::string& token_bytes(int32_t id) const { return tok_.token_bytes(id); }

  // Of the tokens with bytes, starting the loop's automaton in `state`:
  // inside, those whose bytes it takes all of (into any live state), and
  // by the words each needs (those it ends, and one more if it stops inside
  // a word); exits, the rest of each token (from its first byte the
  // automaton cannot take, while it is at a word's end) as a trie whose ids
  // index exit_tokens, with the words ended before it leaves (after one
  // byte at least: leaving before any is what follows the loop, which the
  // matcher walks itself). Tokens whose bytes kill the automaton mid-word
  // are in neither.
  static constexpr int kWithin = 32;
  struct LoopTable {
    TokenSet inside;
    std::vector<TokenSet> inside_within;                   // [k <= kWithin]: needing at most k words
    std::vector<std::pair<int32_t, int32_t>> inside_long;  // (token, words) needing more than kWithin
    ByteTrie exits;
    std::vector<std::pair<int32_t, int32_t>> exit_tokens;  // (token, words before it leaves)
  };
  const LoopTable& loop_table(const ByteDfa& dfa, int state) const;

 private:
  const Tokenizer& tok_;
  int32_t vocab_;
  ByteTrie trie_;
  std::vector<int32_t> specials_;  // control tokens: only a grammar's token elements take them
  std::vector<std::pair<const std::string*, int32_t>> ordinary_;  // bytes and id of every other token
  mutable std::mutex mutex_;
  mutable std::map<std::pair<std::string, int>, std::unique_ptr<LoopTable>> loops_;  // by automaton, state
};

}  // namespace tps
