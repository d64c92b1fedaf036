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
// and `$` at the end. A pattern without `^` or `$` matches anywhere in the
// string, as JSON Schema says: characters of any kind may come before or
// after. Backreferences, lookaround, non-ASCII ranges and classes,
// repetition counts over 1000 and groups nested over 64 deep are refused:
// InputError naming `where`. A repeated group that can match nothing, such
// as (a*)*, is held as the repetition of its non-empty matches.
#pragma once

#include <string>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_text.h"

namespace tps {

int pattern_rule(Grammar& g, JsonText& text, const std::string& pattern, const std::string& where);

// The formats supported: date-time, date, time, uuid, email (each a subset
// of what RFC 3339 / RFC 4122 / RFC 5321 allow, valid for every validator:
// days up to 28 in February, times in UTC or with an offset, lowercase
// UUIDs, plain dot-atom addresses). InputError naming `where` for others.
int format_rule(Grammar& g, JsonText& text, const std::string& format, const std::string& where);

}  // namespace tps
