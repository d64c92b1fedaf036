// What a sequence's output is held to, as data: built once per request --
// by the server from any API's fields (serve/api/output_constraint.h), by
// tpsrun from --json-schema or --grammar (launch/output_format.h) -- carried
// to every rank that samples in the step plan (text() and parse(): its one
// written form), and compiled there into a grammar (engine/grammar) once per
// rank, off the step (constraint.h's cache).
//
// Two forms:
//   raw      the text is `content`: a JSON Schema's JSON, any JSON object,
//            or a hand-written grammar's text (GBNF, gbnf.h);
//   harmony  a whole assistant turn (engine/grammar/harmony_turn.h): an
//            analysis message, closed once it has spent reasoning_budget
//            tokens, then a final message whose content is `content` (any
//            text; none: no final message, a call is forced) or a call of
//            one of `tools`, its arguments held to their schema.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/matcher.h"
#include "engine/text/tokenizer.h"
#include "runtime/error.h"

namespace tps {

// The content of a raw output, a final message or a call's arguments.
struct ContentSpec {
  enum class Kind { text, none, json_object, json_schema, gbnf };
  Kind kind = Kind::text;
  nlohmann::ordered_json schema;  // json_schema
  std::string gbnf;               // gbnf
  // What asked for it, named when it cannot be held: a request parameter
  // ("response_format.json_schema.schema") or a flag ("--json-schema F").
  // Not part of the written form: a spec is refused before it travels.
  std::string param;
};

struct ConstraintSpec {
  enum class Form { raw, harmony };
  Form form = Form::raw;
  ContentSpec content;
  int reasoning_budget = -1;  // harmony: the analysis's, in tokens (-1: none)
  struct Tool {
    std::string name;
    ContentSpec arguments;  // json_schema, or json_object: any JSON object
    // Not strict: the schema is held when the grammar engine can hold it,
    // and the arguments are any JSON object when it cannot.
    bool strict = true;
  };
  std::vector<Tool> tools;

  // A harmony turn asks for something beyond its structure and its budget:
  // a final message's format, a forced call, or a strict tool. One that
  // does not, and has loose tools with schemas, holds nothing when none of
  // them can be held (see CompiledConstraint).
  bool asks() const;
  // The written form (JSON text), also the compiled cache's key.
  std::string text() const;
  // InputError for text that text() did not write.
  static ConstraintSpec parse(std::string_view text);
};

// A spec's content or tool that the grammar engine cannot hold: the
// engine's reason, and the param of what asked for it.
class ConstraintError : public InputError {
 public:
  ConstraintError(const std::string& param, const std::string& reason)
      : InputError(param.empty() ? reason : cat(param, ": ", reason)), param_(param), reason_(reason) {}
  const std::string& param() const { return param_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string param_, reason_;
};

struct CompiledConstraint {
  // Null: the spec holds nothing (a harmony turn that asks nothing but its
  // loose tools' schemas, none of which the engine can hold): the output is
  // free.
  std::shared_ptr<const CompiledGrammar> grammar;
  int reasoning_budget = -1;
  // Loose tools whose schemas the engine cannot hold: their arguments are
  // any JSON object.
  std::vector<std::string> unheld_tools;
  double seconds = 0;  // what compiling it took here (ConstraintCache's: with the index, if it built it)
};

// A harmony special token's id: InputError when the vocabulary lacks it
// (constrained output needs harmony's tokens).
int32_t harmony_special(const Tokenizer& tokenizer, const char* name);

// Compiles it over the tokenizer's index: ConstraintError naming the
// param of what cannot be held (GrammarTooCostly's reason for a grammar
// whose first masks pass the matcher's work limit).
CompiledConstraint compile_constraint(const ConstraintSpec& spec, const Tokenizer& tokenizer,
                                      std::shared_ptr<const TokenIndex> index);

}  // namespace tps
