#include "engine/grammar/grammar.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <queue>

#include "runtime/error.h"

namespace tps {

int ByteDfa::add_state(bool accept) {
  std::array<int16_t, 256> dead;
  dead.fill(-1);
  next.push_back(dead);
  accepting.push_back(accept);
  return states() - 1;
}

int Grammar::declare(const std::string& name) {
  names_.push_back(name);
  alternatives_.emplace_back();
  return rules() - 1;
}

void Grammar::add_alternative(int rule, const std::vector<Element>& elements) {
  alternatives_[rule].push_back(positions());
  positions_.insert(positions_.end(), elements.begin(), elements.end());
  positions_.push_back({Kind::end, 0});
  position_origins_.resize(positions_.size(), origin_);
}

std::string Grammar::set_origin(const std::string& where) {
  std::string before = origins_[origin_];
  auto [it, added] = origin_ids_.try_emplace(where, static_cast<uint32_t>(origins_.size()));
  if (added) origins_.push_back(where);
  origin_ = it->second;
  return before;
}

Grammar::Element Grammar::bytes(const ByteSet& set) {
  auto it = std::find(byte_sets_.begin(), byte_sets_.end(), set);
  if (it == byte_sets_.end()) it = byte_sets_.insert(byte_sets_.end(), set);
  return {Kind::bytes, static_cast<uint32_t>(it - byte_sets_.begin())};
}

Grammar::Element Grammar::loop(ByteDfa dfa, int min, int max) {
  loops_.push_back({std::move(dfa), min, max});
  return {Kind::loop, static_cast<uint32_t>(loops_.size() - 1)};
}

int Grammar::literal(const std::string& text) {
  auto it = literals_.find(text);
  if (it != literals_.end()) return it->second;
  const int r = declare(cat("'", text, "'"));
  std::vector<Element> elements;
  for (unsigned char c : text) elements.push_back(byte(c));
  add_alternative(r, elements);
  literals_.emplace(text, r);
  return r;
}

int Grammar::one_of(const std::string& name, std::vector<std::string> texts) {
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  // A rule for the texts [lo, hi), which share their first `depth` bytes:
  // the bytes they all share next, then one alternative per next byte (or
  // none: the text that ends there). A work list, not recursion: a text may
  // be long.
  struct Node {
    size_t lo, hi, depth;
    int rule;
  };
  const int top = declare(name);
  std::vector<Node> todo{{0, texts.size(), 0, top}};
  while (!todo.empty()) {
    const Node n = todo.back();
    todo.pop_back();
    const std::string &first = texts[n.lo], &last = texts[n.hi - 1];  // sorted: they bound what all share
    size_t d = n.depth;
    while (d < first.size() && d < last.size() && first[d] == last[d]) ++d;
    int branch = n.rule;
    if (d > n.depth) {
      branch = declare(name);
      add_alternative(n.rule, {rule(literal(first.substr(n.depth, d - n.depth))), rule(branch)});
    }
    size_t lo = n.lo;
    if (first.size() == d) add_alternative(branch, {}), ++lo;  // sorted: the text that ends here comes first
    while (lo < n.hi) {
      const char b = texts[lo][d];
      size_t end = lo;
      while (end < n.hi && texts[end][d] == b) ++end;
      const int child = declare(name);
      add_alternative(branch, {byte(static_cast<uint8_t>(b)), rule(child)});
      todo.push_back({lo, end, d + 1, child});
      lo = end;
    }
  }
  return top;
}

int Grammar::sequence(const std::string& name, const std::vector<Element>& elements) {
  const int r = declare(name);
  add_alternative(r, elements);
  return r;
}

int Grammar::choice(const std::string& name, const std::vector<Element>& elements) {
  const int r = declare(name);
  for (const Element& e : elements) add_alternative(r, {e});
  return r;
}

int Grammar::repeat(const std::string& name, Element e, int min, int max) {
  // The optional tail first: at most max - min more (or any number).
  int tail;
  if (max < 0) {
    tail = declare(name + "*");
    add_alternative(tail, {e, rule(tail)});
    add_alternative(tail, {});
  } else {
    tail = declare(cat(name, "{0}"));
    add_alternative(tail, {});
    for (int k = 1; k <= max - min; ++k) {
      const int more = declare(cat(name, "{0,", k, "}"));
      add_alternative(more, {e, rule(tail)});
      add_alternative(more, {});
      tail = more;
    }
  }
  std::vector<Element> elements(min, e);
  elements.push_back(rule(tail));
  return sequence(cat(name, "{", min, ",", max < 0 ? "" : cat(max), "}"), elements);
}

void Grammar::finish(int start) {
  start_ = start;
  for (int r = 0; r < rules(); ++r)
    if (alternatives_[r].empty()) throw InputError(cat("grammar: rule ", names_[r], " has no alternative"));
  // Nullable rules, to a fixed point.
  nullable_.assign(rules(), 0);
  auto alternative_nullable = [&](uint32_t p) {
    for (; positions_[p].kind != Kind::end; ++p) {
      const Element& e = positions_[p];
      if (e.kind == Kind::bytes || e.kind == Kind::token) return false;
      if (e.kind == Kind::rule && !nullable_[e.arg]) return false;
      if (e.kind == Kind::loop && loops_[e.arg].min > 0) return false;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < rules(); ++r)
      if (!nullable_[r] && std::any_of(alternatives_[r].begin(), alternatives_[r].end(), alternative_nullable))
        nullable_[r] = 1, changed = true;
  }
  // Productive rules, to a fixed point: the start must match some text.
  std::vector<uint8_t> productive(rules(), 0);
  auto alternative_productive = [&](uint32_t p) {
    for (; positions_[p].kind != Kind::end; ++p) {
      const Element& e = positions_[p];
      if (e.kind == Kind::bytes && byte_sets_[e.arg].none()) return false;
      if (e.kind == Kind::rule && !productive[e.arg]) return false;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < rules(); ++r)
      if (!productive[r] && std::any_of(alternatives_[r].begin(), alternatives_[r].end(), alternative_productive))
        productive[r] = 1, changed = true;
  }
  if (!productive[start]) throw InputError("grammar: it matches no text at all");
  // Alternatives that can match no text go: a matcher must never take a
  // byte toward one (it would have nowhere to go after).
  for (int r = 0; r < rules(); ++r)
    std::erase_if(alternatives_[r], [&](uint32_t p) { return !alternative_productive(p); });
  // Left recursion: a rule reachable from itself through rules that start
  // an alternative, or follow only nullable elements there.
  std::vector<std::vector<int>> first(rules());
  for (int r = 0; r < rules(); ++r)
    for (uint32_t p : alternatives_[r])
      for (; positions_[p].kind != Kind::end; ++p) {
        const Element& e = positions_[p];
        if (e.kind == Kind::rule) first[r].push_back(static_cast<int>(e.arg));
        if (e.kind == Kind::bytes || e.kind == Kind::token || (e.kind == Kind::rule && !nullable_[e.arg]) ||
            (e.kind == Kind::loop && loops_[e.arg].min > 0))
          break;
      }
  std::vector<uint8_t> mark(rules(), 0);  // 1: on the path, 2: done
  std::function<void(int)> visit = [&](int r) {
    mark[r] = 1;
    for (int s : first[r]) {
      if (mark[s] == 1)  // named by where the request made it
        throw InputError(cat(origins_[position_origins_[alternatives_[s][0]]],
                             ": refers to itself before any text (left recursion)"));
      if (mark[s] == 0) visit(s);
    }
    mark[r] = 2;
  };
  for (int r = 0; r < rules(); ++r)
    if (mark[r] == 0) visit(r);
  find_shortest();
}

namespace {

// The fewest bytes of a word of a loop's automaton: the first accepting
// state a breadth-first walk from the start reaches (-1: none).
int64_t shortest_word(const ByteDfa& d) {
  std::vector<int64_t> depth(d.states(), -1);
  std::deque<int> todo{0};
  depth[0] = 0;
  while (!todo.empty()) {
    const int s = todo.front();
    todo.pop_front();
    for (int16_t t : d.next[s]) {
      if (t < 0 || depth[t] >= 0) continue;
      depth[t] = depth[s] + 1;
      if (d.accepting[t]) return depth[t];
      todo.push_back(t);
    }
  }
  return -1;
}

}  // namespace

// Knuth's generalisation of Dijkstra's shortest paths to grammars: an
// alternative's length is known once each rule in it is, and the least
// length not yet final is a rule's own.
void Grammar::find_shortest() {
  constexpr uint64_t kFar = UINT32_MAX;
  auto element_length = [&](const Element& e) -> uint64_t {
    if (e.kind != Kind::loop) return 1;  // a byte or a special token
    const Loop& l = loops_[e.arg];
    const int64_t word = l.min > 0 ? shortest_word(l.dfa) : 0;
    return word < 0 ? kFar : static_cast<uint64_t>(word) * static_cast<uint64_t>(l.min);
  };
  struct Alternative {
    int rule;
    int pending;      // rule elements whose length is not yet final
    uint64_t length;  // of the elements known so far
  };
  std::vector<Alternative> alternatives;
  std::vector<std::vector<size_t>> used_in(rules());  // a rule's alternatives' indices, once per use
  using Candidate = std::pair<uint64_t, int>;         // a length, its rule
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> candidates;
  for (int r = 0; r < rules(); ++r)
    for (uint32_t p : alternatives_[r]) {
      Alternative a{r, 0, 0};
      for (; positions_[p].kind != Kind::end; ++p) {
        const Element& e = positions_[p];
        if (e.kind == Kind::rule) {
          used_in[e.arg].push_back(alternatives.size());
          ++a.pending;
        } else {
          a.length = std::min(kFar, a.length + element_length(e));
        }
      }
      if (a.pending == 0) candidates.push({a.length, r});
      alternatives.push_back(a);
    }
  shortest_.assign(rules(), static_cast<uint32_t>(kFar));
  std::vector<uint8_t> final(rules(), 0);
  while (!candidates.empty()) {
    const auto [length, r] = candidates.top();
    candidates.pop();
    if (final[r]) continue;
    final[r] = 1, shortest_[r] = static_cast<uint32_t>(length);
    for (size_t i : used_in[r]) {
      Alternative& a = alternatives[i];
      a.length = std::min(kFar, a.length + length);
      if (--a.pending == 0) candidates.push({a.length, a.rule});
    }
  }
}

std::string Grammar::text() const {
  auto set_text = [](const ByteSet& s) {
    if (s.count() == 1)
      for (int b = 0; b < 256; ++b)
        if (s[b]) return b >= 0x20 && b < 0x7f && b != '\'' ? cat("'", static_cast<char>(b), "'") : cat("x", b);
    return cat("[", s.count(), " bytes]");
  };
  std::string out;
  for (int r = 0; r < rules(); ++r) {
    out += cat(names_[r], r == start_ ? " (start)" : "", " ::=");
    for (size_t a = 0; a < alternatives_[r].size(); ++a) {
      out += a ? " |" : "";
      for (uint32_t p = alternatives_[r][a]; positions_[p].kind != Kind::end; ++p) {
        const Element& e = positions_[p];
        switch (e.kind) {
          case Kind::bytes: out += cat(" ", set_text(byte_sets_[e.arg])); break;
          case Kind::rule: out += cat(" ", names_[e.arg]); break;
          case Kind::token: out += cat(" <", e.arg, ">"); break;
          case Kind::loop:
            out += cat(" loop", e.arg, "{", loops_[e.arg].min, ",", loops_[e.arg].max < 0 ? "" : cat(loops_[e.arg].max),
                       "}");
            break;
          case Kind::end: break;
        }
      }
      if (positions_[alternatives_[r][a]].kind == Kind::end) out += " ()";
    }
    out += "\n";
  }
  return out;
}

}  // namespace tps
