// What a request asks of its output's shape, as the engine's constraint
// spec (engine/sched/constraint.h), so that no such request is ever taken
// and ignored:
//   - a chat's `response_format` (json_schema, json_object), its tools'
//     `strict` and its `tool_choice` (auto, none, required, a named
//     function) hold the whole harmony assistant turn: the analysis under a
//     reasoning budget, then the final message's JSON or a function call
//     whose arguments are valid for its parameters (strict tools; any JSON
//     object otherwise), as tool_choice allows;
//   - a tool that is not strict has its arguments held to its parameters
//     too when the grammar engine can hold them (so that its calls parse
//     every time), and left any JSON object when it cannot;
//   - a completion's `response_format` holds the raw text to the JSON.
// A chat that asks none of these is not constrained.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/sched/constraint_spec.h"

namespace tps {

class ConstraintCache;

// What a request's output is held to: none, or the engine's spec, each
// schema in it named by the request parameter it came from.
using OutputConstraint = std::optional<ConstraintSpec>;

// Where a structured-output format object holds its schema: chat's
// response_format nests it ({type: json_schema, json_schema: {name, schema,
// strict}}), the Responses API's text.format does not ({type: json_schema,
// name, schema, strict}).
enum class SchemaAt { json_schema_member, format_itself };

// A structured-output format object, named `param` in refusals
// ("response_format", "text.format"): nothing asked (type text: kind text),
// a JSON object, or a schema named by its parameter. Throws ApiError 400
// naming the member that is malformed. One reader for every API.
ContentSpec read_output_format(const nlohmann::ordered_json& format, const std::string& param, SchemaAt at);

// tool_choice: auto (the default), none, required, or a named function
// ({"type": "function", "function": {"name": NAME}}). Throws ApiError 400
// naming it for anything else.
struct ToolChoice {
  enum class Mode { auto_, none, required, named } mode = Mode::auto_;
  std::string name;  // named
};
ToolChoice read_tool_choice(const nlohmann::ordered_json& body);

// A function the request offers: its name, whether its arguments are held
// to its parameters (strict), the parameters' schema, and the request
// parameter that holds them (named in a refusal).
struct OfferedFunction {
  std::string name;
  bool strict = false;
  nlohmann::ordered_json parameters;
  std::string param;
};

// The harmony turn a request asks for: the final message's content (kind
// text: free), the functions offered and tool_choice. None when nothing is
// asked and no function has parameters to hold. Throws ApiError 400 for a
// tool_choice that asks for a call no function offered can make.
OutputConstraint harmony_turn_constraint(const ContentSpec& final, const std::vector<OfferedFunction>& functions,
                                         const ToolChoice& choice, int budget);

// A chat's (body: the request; budget: the analysis's, effort_budget's of
// engine/sched/constraint.h; default_final: the final answer's content when
// the request asks for no format, ApiLimits::default_final). Throws ApiError
// 400 naming the field for what is malformed or names an unknown function.
OutputConstraint read_chat_constraint(const nlohmann::ordered_json& body, int budget, const ContentSpec& default_final);
// A completion's.
OutputConstraint read_completion_constraint(const nlohmann::ordered_json& body);

// Compiles it, once, into the cache the generation loop then finds it in:
// ApiError 400 naming the parameter of a schema that uses what the grammar
// engine cannot honour, and the keyword and its path. None when it holds
// nothing (a turn that asks nothing, whose tools' parameters the engine
// cannot hold).
void check_output_constraint(OutputConstraint& c, ConstraintCache& cache);

}  // namespace tps
