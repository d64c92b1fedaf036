// A grammar written by hand in GBNF, llama.cpp's notation, so that the
// grammars its users have work unchanged (tpsrun --grammar FILE):
//
//   root  ::= answer ("," answer)*        # the start rule is `root`
//   answer ::= "yes" | "no" | [0-9]{1,3} | name
//   name  ::= [a-zA-Z_] [a-zA-Z0-9_\-]*
//
// Rules `name ::= alternatives` (names of letters, digits and '-'; a rule
// goes on over newlines inside parentheses and after '|'); literals "..."
// and classes [...] (ranges, '^' negation) with the escapes \n \r \t \\ \"
// \] \- \xHH \uHHHH \UHHHHHHHH; '.' for any character; groups ( ... );
// the repetitions * + ? {m} {m,} {m,n} (counts up to 1000); # comments.
// Text is UTF-8: a class or '.' matches one whole character, any code
// point but surrogates. Not taken, refused by line: token references
// (<...>), left recursion, a rule used and never defined.
#pragma once

#include <string>

#include "engine/grammar/grammar.h"

namespace tps {

// Adds text's rules to g; returns the `root` rule. Throws InputError
// "WHERE: line N: what is wrong" ("line N: ..." when where is empty).
int add_gbnf(Grammar& g, const std::string& text, const std::string& where);

}  // namespace tps
