#include "engine/grammar/token_index.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace tps {

TokenSet& TokenSet::operator|=(const TokenSet& o) {
  for (size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
  return *this;
}

int32_t TokenSet::count() const {
  int32_t n = 0;
  for (uint64_t w : words_) n += std::popcount(w);
  return n;
}

ByteTrie ByteTrie::build(std::vector<std::pair<std::string, int32_t>> entries) {
  std::sort(entries.begin(), entries.end());
  ByteTrie t;
  t.nodes.push_back({0, 0, 0});
  std::vector<uint32_t> path{0};  // node indices from the root to the last entry's end
  for (size_t e = 0; e < entries.size(); ++e) {
    const std::string& bytes = entries[e].first;
    if (e == 0 || bytes != entries[e - 1].first) {
      static const std::string kNone;
      const std::string& prev = e ? entries[e - 1].first : kNone;
      size_t common = 0;
      while (common < prev.size() && common < bytes.size() && prev[common] == bytes[common]) ++common;
      path.resize(common + 1);
      for (size_t i = common; i < bytes.size(); ++i) {
        path.push_back(static_cast<uint32_t>(t.nodes.size()));
        t.nodes.push_back({static_cast<uint8_t>(bytes[i]), static_cast<uint16_t>(i + 1), 0});
      }
    }
    // Equal byte strings are adjacent: their ids are a run on one node.
    Node& n = t.nodes[path.back()];
    if (n.ids == n.ids_end) n.ids = static_cast<uint32_t>(t.ids_of.size());
    t.ids_of.push_back(entries[e].second);
    n.ids_end = static_cast<uint32_t>(t.ids_of.size());
  }
  // Subtree ends: a node's subtree runs to the next node no deeper than it.
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    while (!open.empty() && t.nodes[open.back()].depth >= t.nodes[i].depth)
      t.nodes[open.back()].end = i, open.pop_back();
    open.push_back(i);
  }
  for (uint32_t i : open) t.nodes[i].end = static_cast<uint32_t>(t.nodes.size());
  return t;
}

TokenIndex::TokenIndex(const Tokenizer& tokenizer) : tok_(tokenizer), vocab_(tokenizer.vocab_size()) {
  std::vector<std::pair<std::string, int32_t>> entries;
  for (int32_t id = 0; id < vocab_; ++id) {
    const std::string& b = tok_.token_bytes(id);
    if (tok_.is_control(id) || b.empty()) {
      if (tok_.is_control(id)) specials_.push_back(id);
      continue;
    }
    entries.emplace_back(b, id);
    ordinary_.emplace_back(&b, id);
  }
  trie_ = ByteTrie::build(std::move(entries));
}

const TokenIndex::LoopTable& TokenIndex::loop_table(const ByteDfa& dfa, int state) const {
  // Keyed by the automaton's transitions and accepting states as bytes.
  std::string key(reinterpret_cast<const char*>(dfa.next.data()), dfa.next.size() * sizeof dfa.next[0]);
  key.append(reinterpret_cast<const char*>(dfa.accepting.data()), dfa.accepting.size());
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = loops_[{key, state}];
  if (slot) return *slot;
  slot = std::make_unique<LoopTable>();
  LoopTable& t = *slot;
  t.inside = TokenSet(vocab_);
  t.inside_within.assign(kWithin + 1, TokenSet(vocab_));
  std::vector<std::pair<std::string, int32_t>> exits;
  for (const auto& [bytes, id] : ordinary_) {
    int s = state, words = 0;
    size_t i = 0;
    for (; i < bytes->size(); ++i) {
      const int next = dfa.next[s][static_cast<uint8_t>((*bytes)[i])];
      if (next < 0) break;
      s = next, words += dfa.accepting[s];
    }
    if (i == bytes->size()) {
      t.inside.set(id);
      const int needs = words + (dfa.accepting[s] ? 0 : 1);
      if (needs > kWithin)
        t.inside_long.emplace_back(id, needs);
      else
        t.inside_within[needs].set(id);
    } else if (dfa.accepting[s] && i > 0) {  // leaving at the first byte: the matcher's closure has it
      exits.emplace_back(bytes->substr(i), static_cast<int32_t>(t.exit_tokens.size()));
      t.exit_tokens.emplace_back(id, words);
    }
  }
  for (int k = 1; k <= kWithin; ++k) t.inside_within[k] |= t.inside_within[k - 1];
  t.exits = ByteTrie::build(std::move(exits));
  return *slot;
}

}  // namespace tps
