#include "engine/grammar/gbnf.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace tps {

namespace {

using Element = Grammar::Element;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // code points, inclusive, sorted, disjoint

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 1000;

// Every code point but the surrogates, which UTF-8 never encodes.
const Ranges kAnyCharacter = {{0, 0xD7FF}, {0xE000, kMaxCodePoint}};

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r)
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.emplace_back(lo, hi);
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges without_surrogates(const Ranges& r) {
  Ranges out;
  for (const auto& [lo, hi] : r)
    for (const auto& [a, b] : kAnyCharacter)
      if (std::max(lo, a) <= std::min(hi, b)) out.emplace_back(std::max(lo, a), std::min(hi, b));
  return out;
}

std::string utf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6)), s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12)), s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18)), s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// The byte sequences of the code points lo..hi, as sequences of byte
// ranges: split where the encoding's length changes, then where a
// continuation byte would not run over its whole range, until every byte
// position of lo and hi spans a plain range.
void utf8_sequences(Grammar& g, uint32_t lo, uint32_t hi, std::vector<std::vector<Element>>& out) {
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= edge && hi > edge) {
      utf8_sequences(g, lo, edge, out);
      utf8_sequences(g, edge + 1, hi, out);
      return;
    }
  const size_t n = utf8(lo).size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      utf8_sequences(g, lo, lo | m, out);
      utf8_sequences(g, (lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      utf8_sequences(g, lo, (hi & ~m) - 1, out);
      utf8_sequences(g, hi & ~m, hi, out);
      return;
    }
  }
  const std::string a = utf8(lo), b = utf8(hi);
  std::vector<Element> seq;
  for (size_t i = 0; i < n; ++i) {
    ByteSet set;
    for (int c = static_cast<unsigned char>(a[i]); c <= static_cast<unsigned char>(b[i]); ++c) set.set(c);
    seq.push_back(g.bytes(set));
  }
  out.push_back(std::move(seq));
}

class Parser {
 public:
  Parser(Grammar& g, const std::string& text, const std::string& where) : g_(g), s_(text), where_(where) {}

  int parse() {
    for (space(true); i_ < s_.size(); space(true)) {
      const size_t at = line_;
      const std::string name = rule_name();
      space(false);
      if (s_.compare(i_, 3, "::=") != 0) fail(cat("expected '::=' after the rule name '", name, "'"));
      i_ += 3;
      space(true);
      if (!defined_.emplace(name, at).second) fail(cat("rule '", name, "' is defined twice"));
      OriginScope origin(g_, cat(prefix(), "rule '", name, "' (line ", at, ")"));
      alternatives(ref(name), name, false);
      space(false);
      if (i_ < s_.size() && s_[i_] != '\n') fail(cat("unexpected '", s_[i_], "'"));
    }
    for (const auto& [name, line] : used_)
      if (!defined_.count(name)) {
        line_ = line;
        fail(cat("rule '", name, "' is used but never defined"));
      }
    if (!defined_.count("root")) fail("no rule 'root', where a GBNF grammar starts");
    return rules_.at("root");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(cat(prefix(), "line ", line_, ": ", what)); }
  std::string prefix() const { return where_.empty() ? "" : where_ + ": "; }

  // Spaces, tabs and comments; newlines too where a rule goes on.
  void space(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        line_ += c == '\n';
        ++i_;
      } else {
        return;
      }
    }
  }

  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

  std::string rule_name() {
    const size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == start) fail(i_ < s_.size() ? cat("expected a rule name, found '", s_[i_], "'") : "expected a rule name");
    return s_.substr(start, i_ - start);
  }

  int ref(const std::string& name) {
    auto it = rules_.find(name);
    if (it == rules_.end()) it = rules_.emplace(name, g_.declare(name)).first;
    used_.emplace(name, line_);
    return it->second;
  }

  void alternatives(int rule, const std::string& name, bool nested) {
    g_.add_alternative(rule, sequence(name, nested));
    while (i_ < s_.size() && s_[i_] == '|') {
      ++i_;
      space(true);
      g_.add_alternative(rule, sequence(name, nested));
    }
  }

  std::vector<Element> sequence(const std::string& name, bool nested) {
    std::vector<Element> out;
    for (space(nested); i_ < s_.size(); space(nested)) {
      const char c = s_[i_];
      if (c == '|' || c == ')' || c == '\n') break;
      std::optional<Element> e = term(name);
      space(nested);
      if (e) out.push_back(repeated(*e, name));
    }
    return out;
  }

  // One term, or none for an empty literal.
  std::optional<Element> term(const std::string& name) {
    const char c = s_[i_];
    if (c == '"') {
      ++i_;
      std::string text;
      while (true) {
        if (i_ >= s_.size() || s_[i_] == '\n') fail("a literal without its closing '\"'");
        if (s_[i_] == '"') break;
        text += utf8(character());
      }
      ++i_;
      if (text.empty()) return std::nullopt;
      return Grammar::rule(g_.literal(text));
    }
    if (c == '[') return char_class();
    if (c == '.') return ++i_, characters(kAnyCharacter, "any-character");
    if (c == '(') {
      ++i_;
      const int group = g_.declare(cat(name, "-group"));
      alternatives(group, name, true);
      space(true);
      if (i_ >= s_.size() || s_[i_] != ')') fail("a group without its closing ')'");
      ++i_;
      return Grammar::rule(group);
    }
    if (c == '<') fail("token references (<...>) are not supported");
    if (name_char(c)) return Grammar::rule(ref(rule_name()));
    fail(cat("unexpected '", c, "'"));
  }

  Element repeated(Element e, const std::string& name) {
    if (i_ >= s_.size()) return e;
    const char c = s_[i_];
    int lo, hi;
    if (c == '*') {
      lo = 0, hi = -1;
    } else if (c == '+') {
      lo = 1, hi = -1;
    } else if (c == '?') {
      lo = 0, hi = 1;
    } else if (c == '{') {
      ++i_;
      lo = count();
      hi = lo;
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        hi = i_ < s_.size() && s_[i_] == '}' ? -1 : count();
      }
      if (i_ >= s_.size() || s_[i_] != '}') fail("a repetition {m,n} without its closing '}'");
      if (hi >= 0 && hi < lo) fail(cat("the repetition {", lo, ",", hi, "} has its bounds reversed"));
    } else {
      return e;
    }
    ++i_;
    space(false);
    return Grammar::rule(g_.repeat(name, e, lo, hi));
  }

  int count() {
    space(false);
    const size_t start = i_;
    long n = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])) && n <= kMaxRepeat)
      n = n * 10 + (s_[i_++] - '0');
    if (i_ == start) fail("a repetition count must be a number");
    if (n > kMaxRepeat) fail(cat("a repetition count over ", kMaxRepeat));
    space(false);
    return static_cast<int>(n);
  }

  // One character of a literal or class, escapes decoded; UTF-8 read whole.
  uint32_t character() {
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      if (++i_ >= s_.size()) fail("an escape at the end of the text");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\':
        case '"':
        case ']':
        case '[':
        case '-':
        case '^': return static_cast<unsigned char>(e);
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default: fail(cat("unknown escape '\\", e, "'"));
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + n > s_.size()) fail("text that is not UTF-8");
    uint32_t v = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(s_[i_ + k]);
      if ((b & 0xC0) != 0x80) fail("text that is not UTF-8");
      v = v << 6 | (b & 0x3F);
    }
    i_ += n;
    return v;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])))
        fail(cat("an escape needs ", digits, " hex digits"));
      const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[i_])));
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail(cat("escape of ", v, ", which is not a character"));
    return v;
  }

  Element char_class() {
    ++i_;  // '['
    const bool negated = i_ < s_.size() && s_[i_] == '^';
    if (negated) ++i_;
    Ranges ranges;
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n') fail("a class without its closing ']'");
      if (s_[i_] == ']') break;
      const uint32_t lo = character();
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = character();
        if (hi < lo) fail("a class range whose end comes before its start");
      }
      ranges.emplace_back(lo, hi);
    }
    ++i_;
    ranges = normalized(std::move(ranges));
    return characters(without_surrogates(negated ? complement(ranges) : ranges), "class");
  }

  // One character of the ranges: a byte set for ASCII, else a rule of
  // UTF-8 sequences.
  Element characters(const Ranges& ranges, const std::string& name) {
    if (ranges.empty()) fail("a class that matches no character");
    if (ranges.back().second < 0x80) {
      ByteSet set;
      for (const auto& [lo, hi] : ranges)
        for (uint32_t c = lo; c <= hi; ++c) set.set(c);
      return g_.bytes(set);
    }
    std::vector<std::vector<Element>> sequences;
    for (const auto& [lo, hi] : ranges) utf8_sequences(g_, lo, hi, sequences);
    const int rule = g_.declare(name);
    for (const std::vector<Element>& seq : sequences) g_.add_alternative(rule, seq);
    return Grammar::rule(rule);
  }

  Grammar& g_;
  const std::string& s_;
  const std::string& where_;
  size_t i_ = 0, line_ = 1;
  std::map<std::string, int> rules_;
  std::map<std::string, size_t> defined_, used_;  // by name: the line
};

}  // namespace

int add_gbnf(Grammar& g, const std::string& text, const std::string& where) { return Parser(g, text, where).parse(); }

}  // namespace tps
