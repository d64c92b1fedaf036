#include "engine/grammar/matcher.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <map>

namespace tps {

namespace {
constexpr size_t kMasksKept = 32;
constexpr size_t kNodesBeforeCollecting = size_t{1} << 20;

void add_unique(std::vector<int32_t>& set, int32_t id) {
  if (std::find(set.begin(), set.end(), id) == set.end()) set.push_back(id);
}

constexpr int kProbeTokens = 4;
constexpr uint64_t kProbeWork = 4 * Matcher::kWorkPerToken;  // all probes together: a few tokens' worth

// The k-th token of a mask (k < its count).
int32_t nth_token(const TokenSet& mask, int32_t k) {
  const std::vector<uint64_t>& words = mask.words();
  for (size_t w = 0; w < words.size(); ++w) {
    const int ones = std::popcount(words[w]);
    if (k >= ones) {
      k -= ones;
      continue;
    }
    uint64_t bits = words[w];
    for (; k > 0; --k) bits &= bits - 1;
    return static_cast<int32_t>(w * 64 + std::countr_zero(bits));
  }
  return -1;
}

// Follows kProbeTokens tokens of the grammar from a rule (-1: its start),
// each chosen from the mask by a fixed sequence, within the matcher's work
// limit; adds the work done.
void probe_cost(const std::shared_ptr<const CompiledGrammar>& c, int rule, uint64_t& work) {
  Matcher m(c, Matcher::kWorkPerToken, rule);
  uint64_t pick = 0x9E3779B97F4A7C15ull;
  for (int t = 0; t < kProbeTokens && work <= kProbeWork; ++t) {
    const TokenSet& mask = m.allowed();
    work += m.work();
    const int32_t n = mask.count();
    if (n == 0) return;
    pick = pick * 6364136223846793005ull + 1442695040888963407ull;
    const bool taken = m.accept(nth_token(mask, static_cast<int32_t>((pick >> 33) % static_cast<uint64_t>(n))));
    work += m.work();
    if (!taken || m.complete()) return;
  }
}

}  // namespace

std::shared_ptr<const CompiledGrammar> compile_grammar(Grammar g, int start, std::shared_ptr<const TokenIndex> index,
                                                       std::vector<int32_t> end_tokens) {
  g.finish(start);
  for (int l = 0; l < g.loops(); ++l)
    for (int s = 0; s < g.loop(l).dfa.states(); ++s) index->loop_table(g.loop(l).dfa, s);
  auto c = std::make_shared<CompiledGrammar>();
  c->grammar = std::move(g), c->index = std::move(index), c->end_tokens = std::move(end_tokens);
  // From the start, then from each probe, a few tokens each, until the
  // probes' work passes a few tokens' worth (what is not followed here is
  // held to the limit as it comes).
  uint64_t work = 0;
  probe_cost(c, -1, work);
  for (int rule : c->grammar.probes()) probe_cost(c, rule, work);
  return c;
}

GrammarTooCostly::GrammarTooCostly(const std::string& origin, uint64_t limit)
    : InputError(cat(origin, ": too costly to follow (one token's mask needs more than ", limit,
                     " steps of the matcher: a repetition of something that can match in many ways, or too many "
                     "alternatives at once)")),
      origin_(origin) {}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar, uint64_t work_per_token, int start)
    : g_(std::move(grammar)), limit_(work_per_token) {
  nodes_.push_back({UINT32_MAX, 0, -1});  // kAccept
  closures_.emplace_back(1, kAccept);
  closed_.push_back(1);
  for (uint32_t alt : g_->grammar.alternatives(start < 0 ? g_->grammar.start() : start))
    for (int32_t n : closure(intern(alt, 0, -1))) add_unique(state_, n);
  std::sort(state_.begin(), state_.end());
}

int32_t Matcher::intern(uint32_t pos, uint32_t state, int32_t parent) {
  auto [it, added] = ids_.try_emplace(Node{pos, state, parent}, static_cast<int32_t>(nodes_.size()));
  if (added) {
    nodes_.push_back({pos, state, parent});
    closures_.emplace_back();
    closed_.push_back(0);
  }
  return it->second;
}

const std::vector<int32_t>& Matcher::closure(int32_t node) {
  if (closed_[node]) return closures_[node];
  std::vector<int32_t> out, todo{node};
  const uint32_t stamp = ++closure_stamp_;
  const Grammar& g = g_->grammar;
  while (!todo.empty()) {
    const int32_t n = todo.back();
    todo.pop_back();
    spend(1);
    if (!first_visit(closure_seen_, stamp, n)) continue;
    const Node at = nodes_[n];
    if (n == kAccept) {
      out.push_back(n);
      continue;
    }
    const Grammar::Position& p = g.at(at.pos);
    switch (p.kind) {
      case Grammar::Kind::bytes:
      case Grammar::Kind::token: out.push_back(n); break;
      case Grammar::Kind::loop: {
        out.push_back(n);
        const Grammar::Loop& loop = g.loop(p.arg);
        const uint32_t states = loop.dfa.states();
        if (loop.dfa.accepting[at.state % states] && static_cast<int>(at.state / states) >= loop.min)
          todo.push_back(intern(at.pos + 1, 0, at.parent));
        break;
      }
      case Grammar::Kind::rule: {
        // A call that ends its alternative returns straight to the caller's
        // caller: a right-recursive repetition keeps a stack of one frame,
        // and its state repeats.
        const int32_t after =
            g.at(at.pos + 1).kind == Grammar::Kind::end ? at.parent : intern(at.pos + 1, 0, at.parent);
        for (uint32_t alt : g.alternatives(static_cast<int>(p.arg))) todo.push_back(intern(alt, 0, after));
        break;
      }
      case Grammar::Kind::end: todo.push_back(at.parent < 0 ? kAccept : at.parent); break;
    }
  }
  std::sort(out.begin(), out.end());
  closures_[node] = std::move(out);
  closed_[node] = 1;
  return closures_[node];
}

void Matcher::advance(const std::vector<int32_t>& set, uint8_t byte, std::vector<int32_t>& out) {
  out.clear();
  const uint32_t stamp = ++advance_stamp_;
  const Grammar& g = g_->grammar;
  spend(set.size());
  for (int32_t n : set) {
    if (n == kAccept) continue;
    const Node at = nodes_[n];
    const Grammar::Position& p = g.at(at.pos);
    int32_t next = -1;
    if (p.kind == Grammar::Kind::bytes) {
      if (g.byte_set(p.arg)[byte]) next = intern(at.pos + 1, 0, at.parent);
    } else if (p.kind == Grammar::Kind::loop) {
      // The next automaton state, a word more if it accepts; past max
      // words, or with no room for the word a byte starts, nothing.
      const Grammar::Loop& loop = g.loop(p.arg);
      const uint32_t states = loop.dfa.states();
      const int s = loop.dfa.next[at.state % states][byte];
      if (s >= 0) {
        // Without a maximum, words past the minimum are not counted: the
        // state of a long string then repeats, and so does its mask.
        uint32_t words = at.state / states + loop.dfa.accepting[s];
        if (loop.max < 0) words = std::min(words, static_cast<uint32_t>(loop.min));
        const uint32_t needs = words + (loop.dfa.accepting[s] ? 0 : 1);
        if (loop.max < 0 || needs <= static_cast<uint32_t>(loop.max))
          next = intern(at.pos, words * states + static_cast<uint32_t>(s), at.parent);
      }
    }
    if (next < 0) continue;
    const std::vector<int32_t>& more = closure(next);
    spend(more.size());
    for (int32_t m : more)
      if (first_visit(advance_seen_, stamp, m)) out.push_back(m);
  }
  spend(out.size() * std::bit_width(out.size()));
  std::sort(out.begin(), out.end());
}

int32_t Matcher::set_id(const std::vector<int32_t>& set) {
  if (set.empty()) return -1;
  spend(set.size());
  auto [it, added] = set_ids_.try_emplace(set, static_cast<int32_t>(sets_.size()));
  if (added) sets_.push_back(set);
  return it->second;
}

int32_t Matcher::next_set(int32_t set, uint8_t byte) {
  const uint64_t key = static_cast<uint64_t>(set) << 8 | byte;
  auto it = next_sets_.find(key);
  if (it != next_sets_.end()) return it->second;
  std::vector<int32_t> out;
  advance(sets_[set], byte, out);
  const int32_t id = set_id(out);
  next_sets_.emplace(key, id);
  return id;
}

template <typename Take>
void Matcher::walk(const ByteTrie& trie, const std::vector<int32_t>& start, Take take) {
  const std::vector<ByteTrie::Node>& nodes = trie.nodes;
  std::vector<int32_t> sorted = start;
  std::sort(sorted.begin(), sorted.end());
  walk_sets_.assign(1, set_id(sorted));
  if (walk_sets_[0] < 0) return;
  for (uint32_t i = 1; i < nodes.size();) {
    const ByteTrie::Node& n = nodes[i];
    if (walk_sets_.size() <= n.depth) walk_sets_.resize(n.depth + 1);
    spend(1);
    walk_sets_[n.depth] = next_set(walk_sets_[n.depth - 1], n.byte);
    if (walk_sets_[n.depth] < 0) {
      i = n.end;
      continue;
    }
    for (uint32_t k = n.ids; k < n.ids_end; ++k) take(trie.ids_of[k]);
    ++i;
  }
}

void Matcher::compute_mask(TokenSet& out) {
  const Grammar& g = g_->grammar;
  const TokenIndex& index = *g_->index;
  std::vector<int32_t> plain;
  for (int32_t n : state_) {
    if (n == kAccept) {
      for (int32_t e : g_->end_tokens) out.set(e);
      continue;
    }
    const Node at = nodes_[n];
    const Grammar::Position& p = g.at(at.pos);
    if (p.kind == Grammar::Kind::token) {
      out.set(static_cast<int32_t>(p.arg));
    } else if (p.kind == Grammar::Kind::bytes) {
      plain.push_back(n);
    } else if (p.kind == Grammar::Kind::loop) {
      // Tokens inside the loop that leave room for the words they need,
      // and those that leave it after some of their bytes with the words
      // ended within min..max; leaving at a token's first byte is the
      // closure's business (the exit's positions are in the state already).
      const Grammar::Loop& loop = g.loop(p.arg);
      const uint32_t states = loop.dfa.states();
      const int words = static_cast<int>(at.state / states);
      const TokenIndex::LoopTable& table = index.loop_table(loop.dfa, static_cast<int>(at.state % states));
      const int room = loop.max < 0 ? INT32_MAX : loop.max - words;
      if (room >= TokenIndex::kWithin) {
        out |= loop.max < 0 ? table.inside : table.inside_within[TokenIndex::kWithin];
        if (loop.max >= 0)
          for (const auto& [id, needs] : table.inside_long)
            if (needs <= room) out.set(id);
      } else {
        out |= table.inside_within[room];
      }
      walk(table.exits, closure(intern(at.pos + 1, 0, at.parent)), [&](int32_t k) {
        const auto& [id, ended] = table.exit_tokens[k];
        if (words + ended >= loop.min && (loop.max < 0 || words + ended <= loop.max)) out.set(id);
      });
    }
  }
  if (!plain.empty()) walk(index.trie(), plain, [&](int32_t id) { out.set(id); });
}

const TokenSet& Matcher::allowed() {
  for (auto it = masks_.begin(); it != masks_.end(); ++it)
    if (it->first == state_) {
      masks_.splice(masks_.begin(), masks_, it);
      return masks_.front().second;
    }
  TokenSet mask(g_->index->vocab());
  work_ = 0;
  compute_mask(mask);
  masks_.emplace_front(state_, std::move(mask));
  if (masks_.size() > kMasksKept) masks_.pop_back();
  return masks_.front().second;
}

bool Matcher::step(int32_t token, std::vector<int32_t>& next) {
  const TokenIndex& index = *g_->index;
  next.clear();
  work_ = 0;
  if (token < 0 || token >= index.vocab()) return false;
  if (std::binary_search(index.specials().begin(), index.specials().end(), token)) {
    if (complete() && std::find(g_->end_tokens.begin(), g_->end_tokens.end(), token) != g_->end_tokens.end()) {
      next = state_;  // the match is whole: the sequence ends here
      return true;
    }
    for (int32_t n : state_) {
      if (n == kAccept) continue;
      const Node at = nodes_[n];
      const Grammar::Position& p = g_->grammar.at(at.pos);
      if (p.kind == Grammar::Kind::token && static_cast<int32_t>(p.arg) == token)
        for (int32_t m : closure(intern(at.pos + 1, 0, at.parent))) add_unique(next, m);
    }
  } else {
    next = state_;
    std::vector<int32_t> after;
    for (unsigned char b : index.token_bytes(token)) {
      advance(next, b, after);
      next.swap(after);
      if (next.empty()) break;
    }
  }
  std::sort(next.begin(), next.end());
  return !next.empty();
}

bool Matcher::accepts(int32_t token) {
  std::vector<int32_t> next;
  return step(token, next);
}

bool Matcher::accept(int32_t token) {
  std::vector<int32_t> next;
  if (!step(token, next)) return false;
  state_ = std::move(next);
  if (nodes_.size() > kNodesBeforeCollecting || next_sets_.size() > 4 * kNodesBeforeCollecting) collect_garbage();
  return true;
}

void Matcher::too_costly() const {
  // The widest set met names the rules the work went to.
  const std::vector<int32_t>* widest = &state_;
  for (const std::vector<int32_t>& set : sets_)
    if (set.size() > widest->size()) widest = &set;
  std::map<const std::string*, int> stacks;
  const std::string* most = nullptr;
  for (int32_t n : *widest) {
    if (n == kAccept) continue;
    const std::string* origin = &g_->grammar.origin_at(nodes_[n].pos);
    if (++stacks[origin] > (most ? stacks[most] : 0)) most = origin;
  }
  throw GrammarTooCostly(most ? *most : "the grammar", limit_);
}

bool Matcher::matches(std::string_view text) {
  work_ = 0;
  std::vector<int32_t> set = state_, next;
  for (unsigned char b : text) {
    advance(set, b, next);
    set.swap(next);
    if (set.empty()) return false;
  }
  return std::binary_search(set.begin(), set.end(), kAccept);
}

bool Matcher::complete() const { return std::binary_search(state_.begin(), state_.end(), kAccept); }

// Keeps only the nodes the state's stacks are made of (masks are keyed by
// node ids, so they go too).
void Matcher::collect_garbage() {
  std::vector<Node> old = std::move(nodes_);
  nodes_.clear(), ids_.clear(), closures_.clear(), closed_.clear(), masks_.clear();
  sets_.clear(), set_ids_.clear(), next_sets_.clear();
  nodes_.push_back(old[kAccept]);
  closures_.emplace_back(1, kAccept);
  closed_.push_back(1);
  std::unordered_map<int32_t, int32_t> renamed{{kAccept, kAccept}, {-1, -1}};
  auto copy = [&](auto& self, int32_t n) -> int32_t {
    auto it = renamed.find(n);
    if (it != renamed.end()) return it->second;
    const int32_t parent = self(self, old[n].parent);
    return renamed[n] = intern(old[n].pos, old[n].state, parent);
  };
  for (int32_t& n : state_) n = copy(copy, n);
  std::sort(state_.begin(), state_.end());
}

}  // namespace tps
