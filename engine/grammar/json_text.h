// JSON text as grammar rules (RFC 8259): whitespace, strings (any, or of
// min..max characters), numbers and integers (any, or within bounds), a
// given value, any value -- the pieces a JSON Schema compiles to
// (json_schema.h), each made once per grammar.
//
// Choices that keep outputs short and always valid: whitespace between
// tokens is at most 4 of space, tab and newline; strings are UTF-8 (the
// grammar holds multi-byte characters whole) with the escapes JSON allows;
// integers have at most 15 digits and numbers at most 15 integer and 15
// fraction digits and a two-digit exponent, unless bounds say more (so a
// JavaScript client reads them exactly); nesting of free values (a schema
// of `true`, json_object) is at most 8 deep.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/grammar/grammar.h"

namespace tps {

// A bound of a number: its value and whether it is excluded.
struct NumberBound {
  double value;
  bool exclusive = false;
};

class JsonText {
 public:
  // The largest magnitude of a number's whole part written: 15 digits.
  static constexpr uint64_t kLargestMagnitude = 999'999'999'999'999;

  explicit JsonText(Grammar& g) : g_(g) {}
  Grammar::Element ws();
  // A string of any characters, as a loop (grammar.h).
  int any_string();
  // A string of min..max characters (code points; max -1: no limit).
  int string_of_length(int min, int max);
  // One character inside a string, as its JSON text: a UTF-8 character
  // other than '"', '\' and controls, or an escape.
  int character();
  // One character of a set: the ASCII ones marked, and every non-ASCII
  // one when non_ascii; as its JSON text ('"' as \", controls escaped).
  int characters(const std::bitset<128>& ascii, bool non_ascii);
  // A JSON string whose content is `content` (a rule over characters' JSON text).
  int quoted(int content);
  // Integers within [lo, hi] (each bound optional; whole numbers).
  int integer(std::optional<int64_t> lo, std::optional<int64_t> hi);
  // Numbers within bounds; bounds must be whole numbers (InputError names
  // `where` otherwise: "at /properties/x: minimum 0.5 ..."). fraction_digits
  // >= 0: at most that many after the point, and no exponent (multiples of
  // 10^-digits).
  int number(std::optional<NumberBound> lo, std::optional<NumberBound> hi, const std::string& where,
             int fraction_digits = -1);
  int boolean();
  int null();
  // Exactly this value, as its compact text.
  int value(const nlohmann::ordered_json& v);
  // Any value, or any object (at most 8 deep).
  int any_value() { return any_value(kMaxDepth); }
  int any_object() { return any_object(kMaxDepth); }
  // The automaton of string characters' JSON text: state 0 between characters.
  static ByteDfa string_dfa();
  // The same for the characters of a set (as characters() spells them):
  // loops over it are what a pattern's repeated classes become.
  static ByteDfa class_dfa(const std::bitset<128>& ascii, bool non_ascii);
  // An ASCII character's JSON text: itself, or its escape ('"' as \",
  // controls as \n or \u001f).
  static std::string char_text(int c);

 private:
  static constexpr int kMaxDepth = 8;
  int any_value(int depth);
  int any_object(int depth);
  int any_array(int depth);
  // Non-negative integers in [lo, hi] without leading zeros, as alternatives of digit sets.
  int digits_in(uint64_t lo, uint64_t hi);
  int digit_run(int min, int max);

  Grammar& g_;
  std::optional<int> ws_, any_string_, character_, non_ascii_, boolean_, null_, any_number_;
  std::map<int, int> fractions_;  // by most digits
  std::map<std::pair<int, int>, int> lengths_, digit_runs_;
  std::map<int, int> values_, objects_, arrays_;
  std::map<std::pair<uint64_t, uint64_t>, int> ranges_;
};

}  // namespace tps
