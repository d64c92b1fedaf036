#include "engine/grammar/pattern.h"

#include <algorithm>
#include <bitset>
#include <cctype>
#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "runtime/error.h"

namespace tps {

namespace {

using Ascii = std::bitset<128>;
using Element = Grammar::Element;

Ascii ascii_range(int lo, int hi) {
  Ascii s;
  for (int c = lo; c <= hi; ++c) s.set(c);
  return s;
}
const Ascii kDigits = ascii_range('0', '9');
const Ascii kWord = ascii_range('0', '9') | ascii_range('a', 'z') | ascii_range('A', 'Z') | ascii_range('_', '_');
const Ascii kSpace = ascii_range('\t', '\r') | ascii_range(' ', ' ');

// A set of characters: ASCII members, and whether every non-ASCII one is in.
struct CharSet {
  Ascii ascii;
  bool non_ascii = false;
  CharSet negated() const { return {~ascii, !non_ascii}; }
};
const CharSet kAnyButNewline{ascii_range(0, 127) & ~ascii_range('\n', '\n') & ~ascii_range('\r', '\r'), true};

// A parsed pattern.
struct Node {
  enum class Kind { chars, literal, sequence, choice, repeat } kind;
  explicit Node(Kind k) : kind(k) {}
  CharSet set;              // chars
  std::string bytes;        // literal: a non-ASCII character's UTF-8
  std::vector<Node> parts;  // sequence, choice; repeat: its one part
  int min = 0, max = 0;     // repeat (max -1: any)
};

class PatternParser {
 public:
  PatternParser(const std::string& p, const std::string& where) : p_(p), where_(where) {}

  // The strings the pattern matches, whole: each alternative at its top
  // level anchored or not at each end (JSON Schema's patterns match
  // anywhere: without `^`, characters of any kind come before the match;
  // without `$`, after it).
  Node parse() {
    Node whole(Node::Kind::choice);
    do {
      Node branch(Node::Kind::sequence);
      const bool start = eat('^');
      if (!start) branch.parts.push_back(anything());
      branch.parts.push_back(sequence());
      if (!eat('$')) branch.parts.push_back(anything());
      whole.parts.push_back(std::move(branch));
    } while (eat('|'));
    if (at_ != p_.size()) fail(cat("unexpected '", p_[at_], "' at ", at_));
    return whole.parts.size() == 1 ? std::move(whole.parts[0]) : whole;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(cat(where_, ": pattern '", p_, "': ", what));
  }

 private:
  int peek() const { return at_ < p_.size() ? static_cast<unsigned char>(p_[at_]) : -1; }
  bool eat(char c) {
    if (peek() != static_cast<unsigned char>(c)) return false;
    ++at_;
    return true;
  }

  Node alternation() {
    Node choice(Node::Kind::choice);
    choice.parts.push_back(sequence());
    while (eat('|')) choice.parts.push_back(sequence());
    return choice.parts.size() == 1 ? std::move(choice.parts[0]) : choice;
  }

  Node sequence() {
    Node seq(Node::Kind::sequence);
    while (at_ < p_.size() && peek() != '|' && peek() != ')' && !top_level_end())
      seq.parts.push_back(quantified(atom()));
    return seq;
  }

  // A `$` that ends an alternative of the pattern's top level.
  bool top_level_end() const {
    return peek() == '$' && groups_open_ == 0 && (at_ + 1 == p_.size() || p_[at_ + 1] == '|');
  }

  static Node anything() {
    Node any(Node::Kind::repeat);
    any.parts.push_back(chars(CharSet{ascii_range(0, 127), true}));
    any.min = 0, any.max = -1;
    return any;
  }

  int number() {
    if (peek() < '0' || peek() > '9') fail(cat("a count expected at ", at_));
    int n = 0;
    while (peek() >= '0' && peek() <= '9') {
      n = n * 10 + (p_[at_++] - '0');
      if (n > 1000) fail("repetition counts above 1000 are not supported");
    }
    return n;
  }

  Node quantified(Node e) {
    int min = 1, max = 1;
    if (eat('*')) {
      min = 0, max = -1;
    } else if (eat('+')) {
      max = -1;
    } else if (eat('?')) {
      min = 0;
    } else if (peek() == '{' && at_ + 1 < p_.size() && p_[at_ + 1] >= '0' && p_[at_ + 1] <= '9') {
      ++at_;
      min = max = number();
      if (eat(',')) max = peek() == '}' ? -1 : number();
      if (!eat('}')) fail(cat("'}' expected at ", at_));
      if (max >= 0 && max < min) fail(cat("{", min, ",", max, "}: the maximum is below the minimum"));
    } else {
      return e;
    }
    eat('?');  // lazy: the same language
    Node r(Node::Kind::repeat);
    r.parts.push_back(std::move(e));
    r.min = min, r.max = max;
    return r;
  }

  static Node chars(const CharSet& s) {
    Node n(Node::Kind::chars);
    n.set = s;
    return n;
  }

  // One character escaped after a backslash, as a set.
  CharSet escape(bool in_class) {
    if (at_ >= p_.size()) fail("a pattern may not end with a backslash");
    const char c = p_[at_++];
    auto hex = [&](int digits) {
      int v = 0;
      for (int i = 0; i < digits; ++i) {
        const int h = peek();
        const int d = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        if (d < 0) fail(cat("\\", c, " needs ", digits, " hex digits"));
        v = v * 16 + d, ++at_;
      }
      if (v >= 128) fail(cat("\\", c, " of a non-ASCII character is not supported"));
      return CharSet{ascii_range(v, v)};
    };
    switch (c) {
      case 'd': return {kDigits};
      case 'D': return CharSet{kDigits}.negated();
      case 'w': return {kWord};
      case 'W': return CharSet{kWord}.negated();
      case 's': return {kSpace};
      case 'S': return CharSet{kSpace}.negated();
      case 't': return {ascii_range('\t', '\t')};
      case 'n': return {ascii_range('\n', '\n')};
      case 'r': return {ascii_range('\r', '\r')};
      case 'f': return {ascii_range('\f', '\f')};
      case 'v': return {ascii_range('\v', '\v')};
      case '0': return {ascii_range(0, 0)};
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'b':
        if (in_class) return {ascii_range('\b', '\b')};
        fail("word boundaries (\\b) are not supported");
      default:
        if (std::isalnum(static_cast<unsigned char>(c)))
          fail(cat("\\", c, " (a backreference or an unknown escape) is not supported"));
        return {ascii_range(static_cast<unsigned char>(c), static_cast<unsigned char>(c))};
    }
  }

  CharSet bracket() {
    const bool negate = eat('^');
    CharSet s;
    bool first = true;
    while (at_ < p_.size() && (first || peek() != ']')) {
      first = false;
      auto one = [&]() -> CharSet {
        const int c = peek();
        if (c >= 0x80) fail("non-ASCII characters in a class are not supported");
        ++at_;
        return c == '\\' ? escape(true) : CharSet{ascii_range(c, c)};
      };
      const size_t start = at_;
      CharSet lo = one();
      if (peek() == '-' && at_ + 1 < p_.size() && p_[at_ + 1] != ']') {
        ++at_;
        const CharSet hi = one();
        auto single = [&](const CharSet& x) {
          if (x.ascii.count() != 1 || x.non_ascii) fail(cat("a range at ", start, " needs single characters"));
          for (int c = 0; c < 128; ++c)
            if (x.ascii[c]) return c;
          return 0;
        };
        const int a = single(lo), b = single(hi);
        if (a > b) fail(cat("range ", static_cast<char>(a), "-", static_cast<char>(b), " is reversed"));
        lo = CharSet{ascii_range(a, b)};
      }
      s.ascii |= lo.ascii, s.non_ascii |= lo.non_ascii;
    }
    if (!eat(']')) fail("an unterminated class");
    return negate ? s.negated() : s;
  }

  Node atom() {
    const int c = peek();
    if (eat('(')) {
      if (eat('?') && !eat(':')) fail("lookaround and named groups are not supported");
      if (++groups_open_ > kMaxNesting) fail(cat("groups nested more than ", kMaxNesting, " deep"));
      Node inner = alternation();
      if (!eat(')')) fail("an unclosed group");
      --groups_open_;
      return inner;
    }
    if (eat('[')) return chars(bracket());
    if (eat('.')) return chars(kAnyButNewline);
    if (eat('\\')) return chars(escape(false));
    if (c == '^' || c == '$') fail(cat("'", static_cast<char>(c), "' is supported only at the start or the end"));
    if (c == '*' || c == '+' || c == '?' || c == '{' || c == ')')
      fail(cat("'", static_cast<char>(c), "' at ", at_, " has nothing to repeat"));
    if (c < 0x80) {
      ++at_;
      return chars(CharSet{ascii_range(c, c)});
    }
    // A literal non-ASCII character: its UTF-8 bytes as they are (JSON
    // text needs no escape for it).
    const size_t start = at_++;
    while (at_ < p_.size() && (static_cast<unsigned char>(p_[at_]) & 0xC0) == 0x80) ++at_;
    Node n(Node::Kind::literal);
    n.bytes = p_.substr(start, at_ - start);
    return n;
  }

  const std::string& p_;
  static constexpr int kMaxNesting = 64;  // the parser recurses per group
  const std::string& where_;
  size_t at_ = 0;
  int groups_open_ = 0;
};

// A string length bound (minLength, maxLength) held by narrowing the
// pattern: repetitions capped, alternatives that cannot fit left out, a
// sequence's spare length shared among its parts -- every string left
// matches the pattern and has a length in bounds (a subset of those that
// do, chosen in linear time with no counter in the grammar).
constexpr int kAny = INT32_MAX;  // no maximum

struct Span {
  int min, max;  // characters; max kAny: no bound
};

int add(int a, int b) { return a == kAny || b == kAny ? kAny : std::min<int64_t>(int64_t{a} + b, kAny - 1); }
int times(int count, int each) {
  if (count == 0 || each == 0) return 0;
  return count == kAny || each == kAny ? kAny : static_cast<int>(std::min<int64_t>(int64_t{count} * each, kAny - 1));
}

Span span(const Node& n) {
  switch (n.kind) {
    case Node::Kind::chars:
    case Node::Kind::literal: return {1, 1};
    case Node::Kind::sequence: {
      Span s{0, 0};
      for (const Node& p : n.parts) {
        const Span q = span(p);
        s = {add(s.min, q.min), add(s.max, q.max)};
      }
      return s;
    }
    case Node::Kind::choice: {
      Span s{kAny, 0};
      for (const Node& p : n.parts) {
        const Span q = span(p);
        s = {std::min(s.min, q.min), std::max(s.max, q.max)};
      }
      return s;
    }
    case Node::Kind::repeat: {
      const Span q = span(n.parts[0]);
      return {times(n.min, q.min), times(n.max < 0 ? kAny : n.max, q.max)};
    }
  }
  return {0, 0};
}

// Narrows n to its matches of at least `least` characters (a repetition's
// count raised, or a sequence's first parts that can grow); false when this
// cannot make it so.
bool at_least(Node& n, int least) {
  const Span s = span(n);
  if (s.min >= least) return true;
  if (s.max < least) return false;
  switch (n.kind) {
    case Node::Kind::choice:
      std::erase_if(n.parts, [&](Node& p) { return !at_least(p, least); });
      return !n.parts.empty();
    case Node::Kind::sequence: {
      int need = least - s.min;
      for (Node& p : n.parts) {
        const Span q = span(p);
        const int take = std::min(need, q.max == kAny ? need : q.max - q.min);
        if (take > 0 && !at_least(p, q.min + take)) return false;
        need -= std::max(take, 0);
      }
      return need == 0;
    }
    case Node::Kind::repeat: {
      // Each time at least the part's shortest: a part that can be empty
      // is repeated by its non-empty matches (Emitter), so no count helps.
      const int each = span(n.parts[0]).min;
      if (each == 0) return false;
      n.min = std::max(n.min, (least + each - 1) / each);
      return n.max < 0 || n.min <= n.max;
    }
    case Node::Kind::chars:
    case Node::Kind::literal: break;
  }
  return false;
}

// Narrows n to its matches of at most `most` characters; false when none is.
bool at_most(Node& n, int most) {
  const Span s = span(n);
  if (s.min > most) return false;
  if (s.max <= most) return true;
  switch (n.kind) {
    case Node::Kind::choice:
      std::erase_if(n.parts, [&](Node& p) { return !at_most(p, most); });
      return !n.parts.empty();
    case Node::Kind::sequence: {
      // Each part its shortest, and the spare length shared evenly among
      // the parts that can be longer.
      int spare = most - s.min, growing = 0;
      for (const Node& p : n.parts) growing += span(p).max > span(p).min;
      for (Node& p : n.parts) {
        const Span q = span(p);
        if (q.max == q.min) continue;
        const int share = spare / growing--;
        if (!at_most(p, q.min + share)) return false;
        spare -= share;
      }
      return true;
    }
    case Node::Kind::repeat: {
      // At most `most` times (each at least one character: a part that can
      // be empty is repeated by its non-empty matches), each of at most
      // most / count characters.
      Node& part = n.parts[0];
      const int each = std::max(span(part).min, 1);
      const int count = std::min(n.max < 0 ? kAny : n.max, most / each);
      n.max = count;
      n.min = std::min(n.min, count);
      return count == 0 || at_most(part, most / count);
    }
    case Node::Kind::chars:
    case Node::Kind::literal: break;
  }
  return false;
}

// Emits a parsed pattern as rules. A repeated character class becomes a
// loop (grammar.h) -- a table lookup per token instead of a walk of every
// token made of its characters -- when nothing that may follow it starts
// with a byte its characters' text starts with (a loop leaves only on a
// byte it cannot take); otherwise a rule repetition.
class Emitter {
 public:
  Emitter(Grammar& g, JsonText& text, const std::string& where) : g_(g), text_(text), where_(where) {}

  // First bytes of a node's JSON text, and whether it can be empty.
  static ByteSet first(const CharSet& s) {
    ByteSet out;
    for (int c = 0; c < 128; ++c)
      if (s.ascii[c]) out.set(static_cast<uint8_t>(JsonText::char_text(c)[0]));
    if (s.non_ascii)
      for (int b = 0xC2; b <= 0xF4; ++b) out.set(b);
    return out;
  }
  static ByteSet first(const Node& n) {
    switch (n.kind) {
      case Node::Kind::chars: return first(n.set);
      case Node::Kind::literal: return ByteSet().set(static_cast<uint8_t>(n.bytes[0]));
      case Node::Kind::choice: {
        ByteSet out;
        for (const Node& p : n.parts) out |= first(p);
        return out;
      }
      case Node::Kind::sequence: {
        ByteSet out;
        for (const Node& p : n.parts) {
          out |= first(p);
          if (!nullable(p)) break;
        }
        return out;
      }
      case Node::Kind::repeat: return first(n.parts[0]);
    }
    return {};
  }
  static bool nullable(const Node& n) {
    switch (n.kind) {
      case Node::Kind::chars:
      case Node::Kind::literal: return false;
      case Node::Kind::choice:
        return std::any_of(n.parts.begin(), n.parts.end(), [](const Node& p) { return nullable(p); });
      case Node::Kind::sequence:
        return std::all_of(n.parts.begin(), n.parts.end(), [](const Node& p) { return nullable(p); });
      case Node::Kind::repeat: return n.min == 0 || nullable(n.parts[0]);
    }
    return false;
  }

  // The node as an element, given the first bytes of what may follow it.
  Element emit(const Node& n, const ByteSet& follow) {
    switch (n.kind) {
      case Node::Kind::chars: return Grammar::rule(text_.characters(n.set.ascii, n.set.non_ascii));
      case Node::Kind::literal: return Grammar::rule(g_.literal(n.bytes));
      case Node::Kind::choice: {
        const int r = g_.declare("alternatives");
        for (const Node& p : n.parts) g_.add_alternative(r, {emit(p, follow)});
        return Grammar::rule(r);
      }
      case Node::Kind::sequence: {
        std::vector<Element> out(n.parts.size());
        ByteSet after = follow;
        for (size_t i = n.parts.size(); i-- > 0;) {
          out[i] = emit(n.parts[i], after);
          after = nullable(n.parts[i]) ? after | first(n.parts[i]) : first(n.parts[i]);
        }
        return Grammar::rule(g_.sequence("sequence", out));
      }
      case Node::Kind::repeat: {
        const Node& part = n.parts[0];
        if (part.kind == Node::Kind::chars && (first(part.set) & follow).none())
          return g_.loop(JsonText::class_dfa(part.set.ascii, part.set.non_ascii), n.min, n.max);
        const ByteSet inner = follow | first(part);
        if (!nullable(part)) return Grammar::rule(g_.repeat("repeat", emit(part, inner), n.min, n.max));
        // A part that can match nothing repeated as is would be a rule
        // reaching itself without a byte (refused as left-recursive): the
        // same strings are its non-empty matches repeated any number of
        // times up to the maximum.
        const std::optional<Element> some = emit_nonempty(part, inner);
        if (!some || n.max == 0) return Grammar::rule(g_.sequence("empty", {}));
        return Grammar::rule(g_.repeat("repeat", *some, 0, n.max));
      }
    }
    return {};
  }

  // A nullable node's matches but the empty one, as an element (none when
  // it has no other). Sequences share their tails' rules, so the rules
  // grow with the node, not with its nesting.
  std::optional<Element> emit_nonempty(const Node& n, const ByteSet& follow) {
    if (!nullable(n)) return emit(n, follow);
    if (g_.positions() > Grammar::kMaxPositions)
      throw InputError(cat(where_, ": the pattern makes a grammar of over ", Grammar::kMaxPositions, " positions"));
    switch (n.kind) {
      case Node::Kind::choice: {
        std::vector<Element> some;
        for (const Node& p : n.parts)
          if (const std::optional<Element> e = emit_nonempty(p, follow)) some.push_back(*e);
        if (some.empty()) return std::nullopt;
        return Grammar::rule(g_.choice("alternatives", some));
      }
      case Node::Kind::sequence: {
        // Every part is nullable. From the last part back, with `rest` the
        // parts after i and `some` its non-empty matches: parts i.. less the
        // empty match = (part i less empty) rest | some.
        Element rest = Grammar::rule(g_.sequence("empty", {}));
        std::optional<Element> some;
        ByteSet after = follow;
        for (size_t i = n.parts.size(); i-- > 0;) {
          const std::optional<Element> e = emit_nonempty(n.parts[i], after);
          if (e) {
            const int r = g_.declare("sequence");
            g_.add_alternative(r, {*e, rest});
            if (some) g_.add_alternative(r, {*some});
            some = Grammar::rule(r);
          }
          rest = Grammar::rule(g_.sequence("sequence", {emit(n.parts[i], after), rest}));
          after |= first(n.parts[i]);
        }
        return some;
      }
      case Node::Kind::repeat: {
        const std::optional<Element> e = emit_nonempty(n.parts[0], follow | first(n.parts[0]));
        if (!e || n.max == 0) return std::nullopt;
        return Grammar::rule(g_.repeat("repeat", *e, 1, n.max));
      }
      case Node::Kind::chars:
      case Node::Kind::literal: break;  // never nullable
    }
    return std::nullopt;
  }

 private:
  Grammar& g_;
  JsonText& text_;
  const std::string& where_;
};

}  // namespace

int pattern_rule(Grammar& g, JsonText& text, const std::string& pattern, const std::string& where, int min_length,
                 int max_length) {
  Node whole = PatternParser(pattern, where).parse();
  const Span s = span(whole);
  const int most = max_length < 0 ? kAny : max_length;
  if (s.min < min_length || s.max > most) {
    const bool fits = at_least(whole, min_length) && at_most(whole, most);
    const Span now = span(whole);
    if (!fits || now.min < min_length || now.max > most)
      throw InputError(cat(where, ": pattern '", pattern, "' with lengths ", min_length, " to ",
                           max_length < 0 ? "any" : cat(max_length),
                           ": no way found to hold both (a repetition of something that can be empty, or lengths "
                           "the pattern cannot have)"));
  }
  Emitter emitter(g, text, where);
  return g.sequence("pattern", {emitter.emit(whole, ByteSet().set('"'))});  // the closing quote follows
}

int format_rule(Grammar& g, JsonText& text, const std::string& format, const std::string& where, int min_length,
                int max_length) {
  static const std::string kDate =
      "\\d{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)";
  static const std::string kTime = "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)";
  static const std::string kLabel = "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?";
  static const std::string kHost = kLabel + "(\\." + kLabel + "){0,3}";
  static const std::string kOctet = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
  static const std::string kUrl = "https?://" + kHost + "(/[A-Za-z0-9._~-]{1,20}){0,8}";
  static const std::map<std::string, std::string> kHeld = {
      {"date", kDate},
      {"time", kTime},
      {"date-time", kDate + "T" + kTime},
      {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
      {"email", "[a-z0-9_+-]{1,20}(\\.[a-z0-9_+-]{1,20}){0,2}@([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\\.){1,3}[a-z]{2,10}"},
      {"hostname", kHost},
      {"ipv4", kOctet + "(\\." + kOctet + "){3}"},
      {"uri", kUrl},
      {"uri-reference", kUrl}};  // an absolute URL is a URI reference too
  // The formats JSON Schema defines that are not held; any other format
  // name is an annotation (JSON Schema: unknown formats constrain nothing).
  static const std::set<std::string> kRefused = {
      "duration",     "idn-email",    "idn-hostname",          "ipv6", "iri", "iri-reference",
      "uri-template", "json-pointer", "relative-json-pointer", "regex"};
  const auto held = kHeld.find(format);
  if (held != kHeld.end()) return pattern_rule(g, text, "^" + held->second + "$", where, min_length, max_length);
  if (kRefused.count(format)) {
    std::string names;
    for (const auto& [name, unused] : kHeld) names += (names.empty() ? "" : ", ") + name;
    throw InputError(cat(where, ": format '", format, "' is not supported (", names, " are)"));
  }
  return -1;
}

}  // namespace tps
