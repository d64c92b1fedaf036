#include "serve/api/output_constraint.h"

#include <algorithm>

#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "runtime/json_text.h"
#include "serve/api/json_fields.h"
#include "serve/http/api_error.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

ApiError bad(const std::string& param, const std::string& message) { return ApiError(400, message, param); }

// response_format (chat completions and completions): its schema is in
// its json_schema member.
ContentSpec read_response_format(const json& body) {
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return {};
  return read_output_format(*it, "response_format", SchemaAt::json_schema_member);
}

// A strict function's parameters: its schema (a function without them
// takes an empty object).
json strict_parameters(const json& function) {
  const auto p = function.find("parameters");
  if (p != function.end() && !p->is_null()) return *p;
  return {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
}

ContentSpec content(ContentSpec::Kind kind, const std::string& param = "") {
  ContentSpec c;
  c.kind = kind, c.param = param;
  return c;
}

ContentSpec schema_content(json schema, const std::string& param) {
  ContentSpec c = content(ContentSpec::Kind::json_schema, param);
  c.schema = std::move(schema);
  return c;
}

}  // namespace

ContentSpec read_output_format(const json& format, const std::string& param, SchemaAt at) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string())
    throw bad(param, cat("'", param, "' must be an object with a 'type'"));
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") return content(ContentSpec::Kind::json_object, param);
  if (type != "json_schema")
    throw bad(param + ".type", cat("'", param, ".type' is '", type, "', expected text, json_object or json_schema"));
  const json* holder = &format;
  std::string where = param;
  if (at == SchemaAt::json_schema_member) {
    where = param + ".json_schema";
    const auto js = format.find("json_schema");
    if (js == format.end() || !js->is_object())
      throw bad(where, cat("'", where, "' must be an object with a 'schema'"));
    holder = &*js;
  }
  const std::string schema_param = where + ".schema";
  const auto schema = holder->find("schema");
  if (schema == holder->end() || !(schema->is_object() || schema->is_boolean()))
    throw bad(schema_param, cat("'", schema_param, "' must be a JSON Schema (an object)"));
  return schema_content(*schema, schema_param);
}

ToolChoice read_tool_choice(const json& body) {
  ToolChoice c;
  const auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return c;
  if (it->is_string()) {
    const std::string s = it->get<std::string>();
    if (s == "auto") return c;
    if (s == "none") return c.mode = ToolChoice::Mode::none, c;
    if (s == "required") return c.mode = ToolChoice::Mode::required, c;
  } else if (it->is_object() && string_field(*it, "type") == "function") {
    // Chat completions nest the name in "function"; the Responses API does not.
    const auto f = it->find("function");
    c.name = f != it->end() && f->is_object() ? string_field(*f, "name") : string_field(*it, "name");
    if (!c.name.empty()) return c.mode = ToolChoice::Mode::named, c;
  }
  throw bad("tool_choice",
            cat("'tool_choice' ", json_text(*it).substr(0, 60),
                " is not auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}"));
}

OutputConstraint harmony_turn_constraint(const ContentSpec& final, const std::vector<OfferedFunction>& functions,
                                         const ToolChoice& choice, int budget) {
  const bool call_forced = choice.mode == ToolChoice::Mode::required || choice.mode == ToolChoice::Mode::named;
  if (call_forced && functions.empty())
    throw bad("tool_choice", "'tool_choice' asks for a function call, and 'tools' offers none");
  ConstraintSpec spec;
  spec.form = ConstraintSpec::Form::harmony, spec.reasoning_budget = budget;
  spec.content = call_forced ? content(ContentSpec::Kind::none) : final;
  bool loose_schemas = false, named_found = false;
  if (choice.mode != ToolChoice::Mode::none)
    for (const OfferedFunction& f : functions) {
      if (choice.mode == ToolChoice::Mode::named && f.name != choice.name) continue;
      named_found |= choice.mode == ToolChoice::Mode::named;
      ConstraintSpec::Tool tool{f.name, content(ContentSpec::Kind::json_object), f.strict};
      if (f.strict)
        tool.arguments =
            schema_content(f.parameters.is_null() ? strict_parameters(json::object()) : f.parameters, f.param);
      else if (f.parameters.is_object())
        tool.arguments = schema_content(f.parameters, f.param), loose_schemas = true;
      spec.tools.push_back(std::move(tool));
    }
  if (choice.mode == ToolChoice::Mode::named && !named_found)
    throw bad("tool_choice", cat("'tool_choice' names the function '", choice.name, "', which 'tools' does not offer"));
  if (!spec.asks() && !loose_schemas) return std::nullopt;  // nothing asked: free
  return spec;
}

OutputConstraint read_chat_constraint(const json& body, int budget, const ContentSpec& default_final) {
  const ToolChoice choice = read_tool_choice(body);
  ContentSpec final = read_response_format(body);
  if (final.kind == ContentSpec::Kind::text) final = default_final;
  const auto tools_it = body.find("tools");
  const json tools = tools_it != body.end() && tools_it->is_array() ? *tools_it : json::array();
  std::vector<OfferedFunction> functions;
  for (size_t i = 0; i < tools.size(); ++i) {
    // render_functions has refused a tool that is not an object with a function's name.
    const json& f = tools[i]["function"];
    functions.push_back({f["name"].get<std::string>(), bool_field(f, "strict", false), strict_parameters(f),
                         cat("tools[", i, "].function.parameters")});
  }
  return harmony_turn_constraint(final, functions, choice, budget);
}

OutputConstraint read_completion_constraint(const json& body) {
  ContentSpec content = read_response_format(body);
  if (content.kind == ContentSpec::Kind::text) return std::nullopt;
  ConstraintSpec spec;
  spec.content = std::move(content);
  return spec;
}

void check_output_constraint(OutputConstraint& c, ConstraintCache& cache) {
  if (!c) return;
  try {
    if (!cache.get(*c)->grammar) c.reset();
  } catch (const ConstraintError& e) {
    if (e.param().empty()) throw bad("", e.reason());
    throw bad(e.param(), cat("'", e.param(), "': ", e.reason()));
  }
}

}  // namespace tps
