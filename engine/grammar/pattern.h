// JSON Schema's `pattern` (an ECMA-262 regular expression, a subset) and
// `format` as rules over a string's characters as JSON text (json_text.h),
// for a string's content between its quotes.
//
// The subset: literal characters (any UTF-8), escapes (\d \w \s and their
// negations, \t \n \r \f \v \0, \xHH and \uHHHH of ASCII, and a backslash
// before any punctuation), `.`, classes [...] of ASCII characters and
// ranges, negated ones (which take every non-ASCII character too), groups
// (...) and (?:...), alternation, the quantifiers * + ? {n} {n,} {n,m} (a
// lazy `?` after one changes nothing a generator needs), `^` at the start
// and `$` at the end of the pattern or of an alternative of its top level
// (`^a$|^$`). A pattern without `^` or `$` matches anywhere in the string,
// as JSON Schema says: characters of any kind may come before or after. Backreferences, lookaround, non-ASCII ranges
// and classes, repetition counts over 1000 and groups nested over 64 deep are refused: InputError naming `where`. A
// repeated group that can match nothing, such as (a*)*, is held as the repetition of its non-empty matches.
#pragma once

#include <string>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_text.h"

namespace tps {

// Lengths (minLength, maxLength; -1: no maximum) are held by narrowing the
// pattern to strings of those lengths (its repetitions capped, its
// alternatives that cannot fit left out); InputError when that finds none.
int pattern_rule(Grammar& g, JsonText& text, const std::string& pattern, const std::string& where, int min_length = 0,
                 int max_length = -1);

// The formats held: date-time, date, time, uuid, email, hostname, ipv4, uri,
// uri-reference (each a subset of what RFC 3339 / 4122 / 5321 / 1123 / 3986
// allow, valid for every validator: days up to 28 in February, times in UTC
// or with an offset, lowercase UUIDs, plain dot-atom addresses, lowercase
// host names of up to 4 labels, http(s) URLs of plain path segments).
// InputError naming `where` for the other formats JSON Schema defines; -1
// for a format it does not define (an annotation: no constraint).
int format_rule(Grammar& g, JsonText& text, const std::string& format, const std::string& where, int min_length = 0,
                int max_length = -1);

}  // namespace tps
