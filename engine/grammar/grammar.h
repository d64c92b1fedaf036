// A context-free grammar over bytes and special tokens: what constrained
// decoding holds a sequence's output to (engine/grammar/matcher.h). JSON
// Schemas (json_schema.h) and grammars written by hand (gbnf.h) compile to
// it; a Matcher follows one sequence through it and says which tokens may
// come next.
//
// A grammar is rules; a rule is alternatives; an alternative is a sequence
// of elements, flattened into one array of positions (an alternative's
// positions, then an `end`), so that a parse state is a stack of positions
// (matcher.h). Elements:
//   bytes  -- one byte of a set;
//   rule   -- a whole match of another rule (recursion allowed, but not
//             left recursion: a rule that can reach itself without a byte);
//   token  -- one special token (harmony's <|channel|>, <|end|>, ...), which
//             no byte sequence spells;
//   loop   -- a greedy repetition of a regular language given as a byte
//             automaton: min to max of its words (a word ends each time the
//             automaton enters an accepting state), leaving only on a byte
//             the automaton cannot take, at a word's end -- so what follows
//             a loop must not start with a byte the loop could take. JSON
//             strings' characters and free text are loops; the matcher
//             precomputes which tokens stay inside one (token_index.h), so
//             the states most of a JSON answer is spent in cost a table
//             lookup.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tps {

using ByteSet = std::bitset<256>;

// A deterministic automaton over bytes: state 0 is the start; transitions
// to -1 are dead. A loop's accepting states are its word boundaries.
struct ByteDfa {
  std::vector<std::array<int16_t, 256>> next;
  std::vector<uint8_t> accepting;
  int add_state(bool accept);
  int states() const { return static_cast<int>(next.size()); }
};

class Grammar {
 public:
  enum class Kind : uint8_t { bytes, rule, token, loop, end };
  struct Element {
    Kind kind;
    uint32_t arg;  // bytes: a byte set's index; rule: its id; token: its id; loop: its id
  };
  // One position of the flat array: an element, or the end of an alternative.
  using Position = Element;

  // Rules are declared first (so that they can refer to each other), then
  // given their alternatives. Names are for messages and dumps only.
  int declare(const std::string& name);
  void add_alternative(int rule, const std::vector<Element>& elements);
  // Where the alternatives added from now on come from, in the user's words
  // ("schema at /properties/a: 'pattern'"): what a refusal of a grammar too
  // costly to follow names (matcher.h), since rule names are internal.
  // Returns the origin it replaces, for the caller to set back.
  std::string set_origin(const std::string& where);
  // The origin of the alternative a position is in.
  const std::string& origin_at(uint32_t pos) const { return origins_[position_origins_[pos]]; }
  // Rules where a few bytes of a request can make many ways to match at
  // once (a pattern, an enum): compile_grammar follows each a few tokens
  // from its start, wherever it sits in the grammar (matcher.h).
  void add_probe(int rule) { probes_.push_back(rule); }
  const std::vector<int>& probes() const { return probes_; }
  Element bytes(const ByteSet& set);
  Element byte(uint8_t b) { return bytes(ByteSet().set(b)); }
  static Element rule(int id) { return {Kind::rule, static_cast<uint32_t>(id)}; }
  static Element token(int32_t id) { return {Kind::token, static_cast<uint32_t>(id)}; }
  // min to max words (max -1: any number).
  Element loop(ByteDfa dfa, int min = 0, int max = -1);
  // Rules built of others, named from their parts: the literal bytes of
  // text (memoized by text); one alternative; one of the elements; e
  // repeated min to max times (max -1: no limit; a bounded repetition is a
  // chain of max - min optional rules, so keep max modest).
  int literal(const std::string& text);
  // One of the texts, as a trie of rules: a byte at a time, so that however
  // many texts there are, what has been read matches one way (an enum of
  // thousands of strings costs a mask what one string does).
  int one_of(const std::string& name, std::vector<std::string> texts);
  int sequence(const std::string& name, const std::vector<Element>& elements);
  int choice(const std::string& name, const std::vector<Element>& elements);
  int repeat(const std::string& name, Element e, int min, int max);
  // Sets the start rule and checks the grammar: every rule declared has an
  // alternative, no rule is left-recursive. Throws InputError naming the
  // rule's origin (set_origin: where in the request it came from).
  void finish(int start);

  int start() const { return start_; }
  int rules() const { return static_cast<int>(names_.size()); }
  const std::string& name(int rule) const { return names_[rule]; }
  // The first position of each alternative of a rule.
  const std::vector<uint32_t>& alternatives(int rule) const { return alternatives_[rule]; }
  const Position& at(uint32_t pos) const { return positions_[pos]; }
  uint32_t positions() const { return static_cast<uint32_t>(positions_.size()); }
  // The positions a request's grammar may have (what compilers refuse past).
  static constexpr uint32_t kMaxPositions = 400'000;
  const ByteSet& byte_set(uint32_t i) const { return byte_sets_[i]; }
  struct Loop {
    ByteDfa dfa;
    int min = 0, max = -1;
  };
  const Loop& loop(uint32_t i) const { return loops_[i]; }
  int loops() const { return static_cast<int>(loops_.size()); }
  // Whether a rule can match the empty sequence.
  bool nullable(int rule) const { return nullable_[rule]; }
  // The fewest bytes and special tokens a match of a rule takes (after
  // finish): no fewer than the tokens of its shortest match, since a token
  // spells a byte or more. UINT32_MAX: that many or more.
  uint32_t shortest(int rule) const { return shortest_[rule]; }
  // A readable dump (one rule a line), for tests and --grammar debugging.
  std::string text() const;

 private:
  std::vector<std::string> names_;
  std::vector<std::string> origins_{"the grammar"};
  std::map<std::string, uint32_t> origin_ids_{{"the grammar", 0}};
  uint32_t origin_ = 0;                     // of the alternatives added now
  std::vector<uint32_t> position_origins_;  // into origins_
  std::vector<int> probes_;
  std::vector<std::vector<uint32_t>> alternatives_;
  std::vector<Position> positions_;
  std::vector<ByteSet> byte_sets_;
  std::vector<Loop> loops_;
  std::map<std::string, int> literals_;
  std::vector<uint8_t> nullable_;
  std::vector<uint32_t> shortest_;
  int start_ = -1;
  void find_shortest();
};

// The origin of the rules a scope declares (Grammar::set_origin).
class OriginScope {
 public:
  OriginScope(Grammar& g, const std::string& where) : g_(g), before_(g.set_origin(where)) {}
  ~OriginScope() { g_.set_origin(before_); }
  OriginScope(const OriginScope&) = delete;
  OriginScope& operator=(const OriginScope&) = delete;

 private:
  Grammar& g_;
  std::string before_;
};

}  // namespace tps
