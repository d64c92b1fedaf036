#include "engine/grammar/matcher.h"

#include <algorithm>

namespace tps {

namespace {
constexpr size_t kMasksKept = 32;
constexpr size_t kNodesBeforeCollecting = size_t{1} << 20;

void add_unique(std::vector<int32_t>& set, int32_t id) {
  if (std::find(set.begin(), set.end(), id) == set.end()) set.push_back(id);
}
}  // namespace

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : g_(std::move(grammar)) {
  nodes_.push_back({UINT32_MAX, 0, -1});  // kAccept
  closures_.emplace_back(1, kAccept);
  closed_.push_back(1);
  for (uint32_t alt : g_->grammar.alternatives(g_->grammar.start()))
    for (int32_t n : closure(intern(alt, 0, -1))) add_unique(state_, n);
  std::sort(state_.begin(), state_.end());
}

int32_t Matcher::intern(uint32_t pos, uint16_t state, int32_t parent) {
  const uint64_t key = (uint64_t{pos} << 40) ^ (uint64_t{state} << 32) ^ static_cast<uint32_t>(parent);
  auto [it, added] = ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (added) {
    nodes_.push_back({pos, state, parent});
    closures_.emplace_back();
    closed_.push_back(0);
  }
  return it->second;
}

const std::vector<int32_t>& Matcher::closure(int32_t node) {
  if (closed_[node]) return closures_[node];
  std::vector<int32_t> out, todo{node}, seen;
  const Grammar& g = g_->grammar;
  while (!todo.empty()) {
    const int32_t n = todo.back();
    todo.pop_back();
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    const Node at = nodes_[n];
    if (n == kAccept) {
      add_unique(out, n);
      continue;
    }
    const Grammar::Position& p = g.at(at.pos);
    switch (p.kind) {
      case Grammar::Kind::bytes:
      case Grammar::Kind::token: add_unique(out, n); break;
      case Grammar::Kind::loop:
        add_unique(out, n);
        if (g.loop_dfa(p.arg).accepting[at.state]) todo.push_back(intern(at.pos + 1, 0, at.parent));
        break;
      case Grammar::Kind::rule: {
        const int32_t after = intern(at.pos + 1, 0, at.parent);
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
  const Grammar& g = g_->grammar;
  for (int32_t n : set) {
    if (n == kAccept) continue;
    const Node at = nodes_[n];
    const Grammar::Position& p = g.at(at.pos);
    int32_t next = -1;
    if (p.kind == Grammar::Kind::bytes) {
      if (g.byte_set(p.arg)[byte]) next = intern(at.pos + 1, 0, at.parent);
    } else if (p.kind == Grammar::Kind::loop) {
      const int s = g.loop_dfa(p.arg).next[at.state][byte];
      if (s >= 0) next = intern(at.pos, static_cast<uint16_t>(s), at.parent);
    }
    if (next < 0) continue;
    for (int32_t m : closure(next)) add_unique(out, m);
  }
}

void Matcher::walk(const ByteTrie& trie, const std::vector<int32_t>& start, TokenSet& out) {
  const std::vector<ByteTrie::Node>& nodes = trie.nodes;
  if (sets_.empty()) sets_.resize(1);
  sets_[0] = start;
  for (uint32_t i = 1; i < nodes.size();) {
    const ByteTrie::Node& n = nodes[i];
    if (sets_.size() <= n.depth) sets_.resize(n.depth + 1);
    advance(sets_[n.depth - 1], n.byte, sets_[n.depth]);
    if (sets_[n.depth].empty()) {
      i = n.end;
      continue;
    }
    for (uint32_t k = n.ids; k < n.ids_end; ++k) out.set(trie.ids_of[k]);
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
      // Tokens inside the loop, and those that leave it after some of
      // their bytes; leaving at a token's first byte is the closure's
      // business (the exit's positions are in the state already).
      const ByteDfa& dfa = g.loop_dfa(p.arg);
      const TokenIndex::LoopTable& table = index.loop_table(dfa, at.state);
      out |= table.inside;
      walk(table.exits, closure(intern(at.pos + 1, 0, at.parent)), out);
    }
  }
  if (!plain.empty()) walk(index.trie(), plain, out);
}

const TokenSet& Matcher::allowed() {
  for (auto it = masks_.begin(); it != masks_.end(); ++it)
    if (it->first == state_) {
      masks_.splice(masks_.begin(), masks_, it);
      return masks_.front().second;
    }
  TokenSet mask(g_->index->vocab());
  compute_mask(mask);
  masks_.emplace_front(state_, std::move(mask));
  if (masks_.size() > kMasksKept) masks_.pop_back();
  return masks_.front().second;
}

bool Matcher::step(int32_t token, std::vector<int32_t>& next) {
  const TokenIndex& index = *g_->index;
  next.clear();
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
  if (nodes_.size() > kNodesBeforeCollecting) collect_garbage();
  return true;
}

bool Matcher::complete() const { return std::binary_search(state_.begin(), state_.end(), kAccept); }

// Keeps only the nodes the state's stacks are made of (masks are keyed by
// node ids, so they go too).
void Matcher::collect_garbage() {
  std::vector<Node> old = std::move(nodes_);
  nodes_.clear(), ids_.clear(), closures_.clear(), closed_.clear(), masks_.clear();
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
