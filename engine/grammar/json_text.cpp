#include "engine/grammar/json_text.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace tps {

namespace {

using Element = Grammar::Element;

constexpr uint64_t kMaxDigits = 15;  // JavaScript reads up to 2^53 exactly
const uint64_t kMaxMagnitude = JsonText::kLargestMagnitude;

ByteSet range(int lo, int hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(b);
  return s;
}

// A rule for one word of a DFA's language, from state 0 back to state 0:
// each transition's byte set, then the word's rest from its target.
int word_rule(Grammar& g, const ByteDfa& dfa, const std::string& name) {
  std::vector<int> rules(dfa.states(), -1);
  std::function<int(int)> rule_of = [&](int s) {
    if (rules[s] >= 0) return rules[s];
    rules[s] = g.declare(cat(name, s ? cat("@", s) : ""));
    std::map<int, ByteSet> by_target;
    for (int b = 0; b < 256; ++b)
      if (dfa.next[s][b] >= 0) by_target[dfa.next[s][b]].set(b);
    for (const auto& [t, set] : by_target) {
      if (t == 0)
        g.add_alternative(rules[s], {g.bytes(set)});
      else
        g.add_alternative(rules[s], {g.bytes(set), Grammar::rule(rule_of(t))});
    }
    return rules[s];
  };
  return rule_of(0);
}

std::string pow10_minus_1(size_t digits) { return std::string(digits, '9'); }

// Alternatives of digit sets for the same-length decimal strings in [a, b].
void same_length(const std::string& a, const std::string& b, std::vector<ByteSet>& prefix,
                 std::vector<std::vector<ByteSet>>& out) {
  if (a.empty()) return out.push_back(prefix);
  const std::string ar = a.substr(1), br = b.substr(1);
  const bool a_zeros = ar.find_first_not_of('0') == std::string::npos;
  const bool b_nines = br.find_first_not_of('9') == std::string::npos;
  auto with = [&](ByteSet first, const std::string& lo, const std::string& hi) {
    prefix.push_back(first);
    same_length(lo, hi, prefix, out);
    prefix.pop_back();
  };
  if (a[0] == b[0]) return with(range(a[0], a[0]), ar, br);
  int low = a[0], high = b[0];
  if (!a_zeros) with(range(a[0], a[0]), ar, pow10_minus_1(ar.size())), ++low;
  if (!b_nines) --high;
  if (low <= high) with(range(low, high), std::string(ar.size(), '0'), pow10_minus_1(ar.size()));
  if (!b_nines) with(range(b[0], b[0]), std::string(br.size(), '0'), br);
}

}  // namespace

namespace {

void go(ByteDfa& d, int from, const ByteSet& set, int to) {
  for (int b = 0; b < 256; ++b)
    if (set[b]) d.next[from][b] = static_cast<int16_t>(to);
}

// The multi-byte UTF-8 characters (well formed: no overlongs, surrogates or
// code points past U+10FFFF), from state `start` back to it.
void add_utf8(ByteDfa& d, int start) {
  auto state = [&] { return d.add_state(false); };
  const int c1 = state(), c2 = state(), c3 = state(), e0 = state(), ed = state(), f0 = state(), f4 = state();
  go(d, start, range(0xC2, 0xDF), c1);
  go(d, start, range(0xE0, 0xE0), e0);
  go(d, start, range(0xE1, 0xEC) | range(0xEE, 0xEF), c2);
  go(d, start, range(0xED, 0xED), ed);
  go(d, start, range(0xF0, 0xF0), f0);
  go(d, start, range(0xF1, 0xF3), c3);
  go(d, start, range(0xF4, 0xF4), f4);
  const ByteSet cont = range(0x80, 0xBF);
  go(d, c1, cont, start), go(d, c2, cont, c1), go(d, c3, cont, c2);
  go(d, e0, range(0xA0, 0xBF), c1), go(d, ed, range(0x80, 0x9F), c1);
  go(d, f0, range(0x90, 0xBF), c2), go(d, f4, range(0x80, 0x8F), c2);
}

}  // namespace

std::string JsonText::char_text(int c) {
  if (c == '"') return "\\\"";
  if (c == '\\') return "\\\\";
  if (c >= 0x20) return std::string(1, static_cast<char>(c));
  static const char* const kShort = "\b\t\n\f\r";  // controls with a one-letter escape
  const char* s = c ? std::strchr(kShort, c) : nullptr;
  if (s) return std::string("\\") + "btnfr"[s - kShort];
  return cat("\\u00", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
}

ByteDfa JsonText::string_dfa() {
  ByteDfa d;
  const int start = d.add_state(true);
  ByteSet plain = range(0x20, 0x7F);
  plain.reset('"'), plain.reset('\\');
  go(d, start, plain, start);
  add_utf8(d, start);
  const int esc = d.add_state(false), u1 = d.add_state(false), u2 = d.add_state(false), u3 = d.add_state(false),
            u4 = d.add_state(false);
  go(d, start, range('\\', '\\'), esc);
  ByteSet escaped;
  for (char c : std::string("\"\\/bfnrt")) escaped.set(static_cast<uint8_t>(c));
  go(d, esc, escaped, start), go(d, esc, range('u', 'u'), u1);
  const ByteSet hex = range('0', '9') | range('a', 'f') | range('A', 'F');
  go(d, u1, hex, u2), go(d, u2, hex, u3), go(d, u3, hex, u4), go(d, u4, hex, start);
  return d;
}

ByteDfa JsonText::class_dfa(const std::bitset<128>& ascii, bool non_ascii) {
  ByteDfa d;
  const int start = d.add_state(true);
  for (int c = 0; c < 128; ++c) {
    if (!ascii[c]) continue;
    // Each character's JSON text as a path from the start back to it (the
    // escapes share their first bytes).
    const std::string text = char_text(c);
    int s = start;
    for (size_t i = 0; i + 1 < text.size(); ++i) {
      const uint8_t b = static_cast<uint8_t>(text[i]);
      if (d.next[s][b] < 0) {
        const int added = d.add_state(false);  // grows d.next: index again after
        d.next[s][b] = static_cast<int16_t>(added);
      }
      s = d.next[s][b];
    }
    d.next[s][static_cast<uint8_t>(text.back())] = static_cast<int16_t>(start);
  }
  if (non_ascii) add_utf8(d, start);
  return d;
}

Element JsonText::ws() {
  if (!ws_) {
    ByteSet space;
    space.set(' '), space.set('\t'), space.set('\n');
    ws_ = g_.repeat("ws", g_.bytes(space), 0, 4);
  }
  return Grammar::rule(*ws_);
}

int JsonText::character() {
  if (!character_) character_ = word_rule(g_, string_dfa(), "char");
  return *character_;
}

int JsonText::characters(const std::bitset<128>& ascii, bool non_ascii) {
  const int r = g_.declare("class");
  ByteSet plain;
  for (int c = 0; c < 128; ++c) {
    if (!ascii[c]) continue;
    const std::string text = char_text(c);
    if (text.size() == 1)
      plain.set(c);
    else
      g_.add_alternative(r, {Grammar::rule(g_.literal(text))});
  }
  if (plain.any()) g_.add_alternative(r, {g_.bytes(plain)});
  if (non_ascii) {
    if (!non_ascii_) {
      ByteDfa d;
      add_utf8(d, d.add_state(true));
      non_ascii_ = word_rule(g_, d, "non_ascii");
    }
    g_.add_alternative(r, {Grammar::rule(*non_ascii_)});
  }
  if (g_.alternatives(r).empty()) g_.add_alternative(r, {g_.bytes(ByteSet())});  // no character
  return r;
}

int JsonText::quoted(int content) {
  return g_.sequence("string", {g_.byte('"'), Grammar::rule(content), g_.byte('"')});
}

int JsonText::any_string() {
  if (!any_string_) any_string_ = g_.sequence("string", {g_.byte('"'), g_.loop(string_dfa()), g_.byte('"')});
  return *any_string_;
}

int JsonText::string_of_length(int min, int max) {
  if (min == 0 && max < 0) return any_string();
  auto [it, added] = lengths_.try_emplace({min, max}, -1);
  if (added) it->second = g_.sequence("string", {g_.byte('"'), g_.loop(string_dfa(), min, max), g_.byte('"')});
  return it->second;
}

int JsonText::digit_run(int min, int max) {
  auto [it, added] = digit_runs_.try_emplace({min, max}, -1);
  if (added) it->second = g_.repeat("digit", g_.bytes(range('0', '9')), min, max);
  return it->second;
}

int JsonText::digits_in(uint64_t lo, uint64_t hi) {
  auto [it, added] = ranges_.try_emplace({lo, hi}, -1);
  if (!added) return it->second;
  const int r = it->second = g_.declare(cat("[", lo, "..", hi, "]"));
  for (size_t len = std::to_string(lo).size(); len <= std::to_string(hi).size(); ++len) {
    const uint64_t first = len == 1 ? 0 : static_cast<uint64_t>(std::pow(10.0, static_cast<double>(len - 1)));
    const std::string a = std::to_string(std::max(lo, first));
    const std::string b = len < std::to_string(hi).size() ? pow10_minus_1(len) : std::to_string(hi);
    if (a.size() != len || a > b) continue;
    std::vector<ByteSet> prefix;
    std::vector<std::vector<ByteSet>> alternatives;
    same_length(a, b, prefix, alternatives);
    for (const auto& sets : alternatives) {
      std::vector<Element> elements;
      for (const ByteSet& s : sets) elements.push_back(g_.bytes(s));
      g_.add_alternative(r, elements);
    }
  }
  return r;
}

int JsonText::integer(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  const int64_t cap = static_cast<int64_t>(kMaxMagnitude);
  const int64_t a = std::max(lo.value_or(-cap), -cap), b = std::min(hi.value_or(cap), cap);
  const int r = g_.declare(cat("integer[", a, "..", b, "]"));
  if (b >= 0)
    g_.add_alternative(
        r, {Grammar::rule(digits_in(static_cast<uint64_t>(std::max<int64_t>(a, 0)), static_cast<uint64_t>(b)))});
  if (a < 0)
    g_.add_alternative(r, {g_.byte('-'), Grammar::rule(digits_in(static_cast<uint64_t>(std::max<int64_t>(-b, 1)),
                                                                 static_cast<uint64_t>(-a)))});
  if (g_.alternatives(r).empty()) g_.add_alternative(r, {g_.bytes(ByteSet())});  // matches nothing
  return r;
}

int JsonText::number(std::optional<NumberBound> lo, std::optional<NumberBound> hi, const std::string& where,
                     int fraction_digits) {
  // A bound beyond every number written (15 integer digits) bounds nothing.
  const double beyond = static_cast<double>(kMaxMagnitude) + 1;
  if (hi && hi->value >= beyond) hi.reset();
  if (lo && lo->value <= -beyond) lo.reset();
  for (const auto& [bound, name] : {std::pair{lo, "minimum"}, {hi, "maximum"}})
    if (bound && (bound->value != std::floor(bound->value) || std::fabs(bound->value) > 1e15))
      throw InputError(cat(where, ": ", name, " ", bound->value,
                           " on a number: only whole-number bounds within 10^15 are supported"));
  const int digits = fraction_digits < 0 ? static_cast<int>(kMaxDigits) : fraction_digits;
  auto [fraction, added] = fractions_.try_emplace(digits, -1);
  if (added)
    fraction->second =
        digits == 0
            ? g_.sequence("no fraction", {})
            : g_.repeat("fraction",
                        Grammar::rule(g_.sequence("fraction", {g_.byte('.'), Grammar::rule(digit_run(1, digits))})), 0,
                        1);
  const int optional_fraction = fraction->second;
  if (!lo && !hi && fraction_digits < 0) {
    if (!any_number_) {
      ByteSet e, sign;
      e.set('e'), e.set('E'), sign.set('+'), sign.set('-');
      const int exponent = g_.sequence("exponent", {g_.bytes(e), Grammar::rule(g_.repeat("sign", g_.bytes(sign), 0, 1)),
                                                    Grammar::rule(digit_run(1, 2))});
      any_number_ = g_.sequence("number", {Grammar::rule(g_.repeat("minus", g_.byte('-'), 0, 1)),
                                           Grammar::rule(digits_in(0, kMaxMagnitude)), Grammar::rule(optional_fraction),
                                           Grammar::rule(g_.repeat("exponent", Grammar::rule(exponent), 0, 1))});
    }
    return *any_number_;
  }
  const int r = g_.declare("number");
  // Magnitudes m in [low, high] (high absent: any), each end maybe
  // excluded: whole parts whose every fraction is inside, and high itself
  // when included. (A whole part at an excluded end with a fraction above
  // it is left out: a subset of the valid numbers.)
  const auto magnitudes = [&](std::vector<Element> sign, double low, bool low_out, std::optional<double> high,
                              bool high_out) {
    const uint64_t first = static_cast<uint64_t>(low) + (low_out ? 1 : 0);
    const uint64_t last = high ? static_cast<uint64_t>(*high) : kMaxMagnitude + 1;
    if (last >= 1 && first <= last - 1) {
      std::vector<Element> e = sign;
      e.push_back(Grammar::rule(digits_in(first, last - 1)));
      e.push_back(Grammar::rule(optional_fraction));
      g_.add_alternative(r, e);
    }
    if (high && !high_out && *high >= low && !(low_out && *high == low)) {
      std::vector<Element> e = sign;
      e.push_back(Grammar::rule(digits_in(last, last)));
      g_.add_alternative(r, e);
    }
  };
  const bool has_nonnegative = !hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive);
  const bool has_negative = !lo || lo->value < 0;
  if (has_nonnegative) {
    const bool below_zero = lo && lo->value < 0;
    magnitudes({}, below_zero || !lo ? 0.0 : lo->value, below_zero || !lo ? false : lo->exclusive,
               hi ? std::optional<double>(hi->value) : std::nullopt, hi && hi->exclusive);
  }
  if (has_negative) {
    const bool above_zero = !hi || hi->value >= 0;
    magnitudes({g_.byte('-')}, above_zero ? 0.0 : -hi->value, above_zero ? true : hi->exclusive,
               lo ? std::optional<double>(-lo->value) : std::nullopt, lo && lo->exclusive);
  }
  if (g_.alternatives(r).empty()) throw InputError(cat(where, ": no number lies within the bounds"));
  return r;
}

int JsonText::boolean() {
  if (!boolean_)
    boolean_ = g_.choice("boolean", {Grammar::rule(g_.literal("true")), Grammar::rule(g_.literal("false"))});
  return *boolean_;
}

int JsonText::null() {
  if (!null_) null_ = g_.literal("null");
  return *null_;
}

int JsonText::value(const nlohmann::ordered_json& v) {
  try {
    return g_.literal(v.dump());
  } catch (const nlohmann::json::exception& e) {
    throw InputError(cat("a value that is not valid JSON text (", e.what(), ")"));
  }
}

int JsonText::any_value(int depth) {
  auto [it, added] = values_.try_emplace(depth, -1);
  if (!added) return it->second;
  const int r = it->second = g_.declare(cat("value", depth));
  for (int scalar : {any_string(), number(std::nullopt, std::nullopt, ""), boolean(), null()})
    g_.add_alternative(r, {Grammar::rule(scalar)});
  if (depth > 0) {
    g_.add_alternative(r, {Grammar::rule(any_object(depth))});
    g_.add_alternative(r, {Grammar::rule(any_array(depth))});
  }
  return r;
}

int JsonText::any_object(int depth) {
  auto [it, added] = objects_.try_emplace(depth, -1);
  if (!added) return it->second;
  const int r = it->second = g_.declare(cat("object", depth));
  const int member = g_.sequence(
      "member", {Grammar::rule(any_string()), ws(), g_.byte(':'), ws(), Grammar::rule(any_value(depth - 1))});
  const int more = g_.repeat(
      "members", Grammar::rule(g_.sequence("more", {ws(), g_.byte(','), ws(), Grammar::rule(member)})), 0, -1);
  g_.add_alternative(r, {g_.byte('{'), ws(), g_.byte('}')});
  g_.add_alternative(r, {g_.byte('{'), ws(), Grammar::rule(member), Grammar::rule(more), ws(), g_.byte('}')});
  return r;
}

int JsonText::any_array(int depth) {
  auto [it, added] = arrays_.try_emplace(depth, -1);
  if (!added) return it->second;
  const int r = it->second = g_.declare(cat("array", depth));
  const Element item = Grammar::rule(any_value(depth - 1));
  const int more = g_.repeat("items", Grammar::rule(g_.sequence("more", {ws(), g_.byte(','), ws(), item})), 0, -1);
  g_.add_alternative(r, {g_.byte('['), ws(), g_.byte(']')});
  g_.add_alternative(r, {g_.byte('['), ws(), item, Grammar::rule(more), ws(), g_.byte(']')});
  return r;
}

}  // namespace tps
