// Constraint specs (engine/sched/constraint_spec.h) as the engine tests
// write them: a raw schema or grammar, a harmony turn.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/sched/constraint_spec.h"

namespace tps::testing {

inline ContentSpec content(ContentSpec::Kind kind) {
  ContentSpec c;
  c.kind = kind;
  return c;
}

inline ContentSpec schema_content(const std::string& schema) {
  ContentSpec c = content(ContentSpec::Kind::json_schema);
  c.schema = nlohmann::ordered_json::parse(schema);
  return c;
}

// The raw text held to the schema's JSON (a JSON text) or to a GBNF grammar.
inline ConstraintSpec schema_spec(const std::string& schema) {
  ConstraintSpec s;
  s.content = schema_content(schema);
  return s;
}
inline ConstraintSpec gbnf_spec(const std::string& gbnf) {
  ConstraintSpec s;
  s.content = content(ContentSpec::Kind::gbnf), s.content.gbnf = gbnf;
  return s;
}

// A harmony turn: the analysis under the budget, then `final` or a call of
// one of the tools (strict).
inline ConstraintSpec harmony_spec(int reasoning_budget, ContentSpec final,
                                   std::vector<ConstraintSpec::Tool> tools = {}) {
  ConstraintSpec s;
  s.form = ConstraintSpec::Form::harmony, s.reasoning_budget = reasoning_budget;
  s.content = std::move(final), s.tools = std::move(tools);
  return s;
}

}  // namespace tps::testing
