#include "serve/tool_schema.h"

#include <sstream>

#include "serve/api_error.h"
#include "serve/json_fields.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

void comment_lines(std::string& out, const std::string& text, const std::string& indent) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += indent + "// " + line + "\n";
}

std::string type_of(const json& schema, const std::string& indent);

// {\n  props \n} with each property: [// description] key[?]: type,[ // default: v]
std::string object_type(const json& schema, const std::string& indent) {
  std::string out = "{\n";
  const json props = schema.value("properties", json::object());
  const json required = schema.value("required", json::array());
  for (const auto& [key, prop] : props.items()) {
    if (prop.is_object() && prop.contains("description") && prop["description"].is_string())
      comment_lines(out, prop["description"].get<std::string>(), indent);
    bool is_required = false;
    for (const json& r : required) is_required |= r.is_string() && r.get<std::string>() == key;
    out += indent + key + (is_required ? "" : "?") + ": " + type_of(prop, indent + "    ") + ",";
    if (prop.is_object() && prop.contains("default")) {
      const json& d = prop["default"];
      const bool enum_string = d.is_string() && prop.contains("enum");
      out += " // default: " + (enum_string ? d.get<std::string>() : d.dump());
    }
    out += "\n";
  }
  return out + indent + "}";
}

std::string type_of(const json& schema, const std::string& indent) {
  if (!schema.is_object()) return "any";
  std::string t;
  if (schema.contains("enum") && schema["enum"].is_array()) {
    for (const json& v : schema["enum"]) t += (t.empty() ? "" : " | ") + v.dump();
  } else if (schema.contains("type") && schema["type"].is_array()) {
    for (const json& v : schema["type"])
      if (v.is_string()) t += (t.empty() ? "" : " | ") + type_of(json{{"type", v}}, indent);
  } else {
    const std::string type = string_field(schema, "type");
    if (type == "string")
      t = "string";
    else if (type == "number" || type == "integer")
      t = "number";
    else if (type == "boolean")
      t = "boolean";
    else if (type == "null")
      t = "null";
    else if (type == "array")
      t = schema.contains("items") ? type_of(schema["items"], indent) + "[]" : "Array<any>";
    else if (type == "object")
      t = object_type(schema, indent);
    else
      t = "any";
  }
  if (bool_field(schema, "nullable", false)) t += " | null";
  return t;
}

}  // namespace

std::string render_functions(const json& tools) {
  if (!tools.is_array()) throw ApiError(400, "'tools' must be an array of function tools", "tools");
  std::string out;
  for (const json& tool : tools) {
    if (!tool.is_object() || string_field(tool, "type") != "function" || !tool.contains("function") ||
        !tool["function"].is_object())
      throw ApiError(400, "each tool must be {\"type\": \"function\", \"function\": {...}}", "tools");
    const json& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      throw ApiError(400, "a function tool needs a name", "tools");
    if (f.contains("description") && f["description"].is_string())
      comment_lines(out, f["description"].get<std::string>(), "");
    const std::string name = f["name"].get<std::string>();
    if (f.contains("parameters") && f["parameters"].is_object())
      out += "type " + name + " = (_: " + type_of(f["parameters"], "") + ") => any;\n\n";
    else
      out += "type " + name + " = () => any;\n\n";
  }
  return out;
}

}  // namespace tps
