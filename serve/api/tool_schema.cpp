#include "serve/api/tool_schema.h"

#include <string_view>
#include <unordered_set>

#include "runtime/error.h"
#include "serve/api/json_fields.h"
#include "serve/http/api_error.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

// The rendering, refused once it passes its bound. Written in one string,
// never built per level and copied up: linear in what it writes.
class Writer {
 public:
  explicit Writer(size_t max_bytes) : max_(max_bytes) {}
  Writer& operator<<(std::string_view text) {
    out_ += text;
    if (out_.size() > max_)
      throw ApiError(400,
                     cat("the tools' function types render to more than ", max_, " bytes: more than the context holds"),
                     "tools");
    return *this;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  size_t max_;
};

void comment_lines(Writer& out, std::string_view text, std::string_view indent) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    out << indent << "// " << text.substr(0, end) << "\n";
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
}

void put_type(Writer& out, const json& schema, const std::string& indent);

// {\n  props \n} with each property: [// description] key[?]: type,[ // default: v]
void put_object(Writer& out, const json& schema, const std::string& indent) {
  out << "{\n";
  const auto props = schema.find("properties");
  std::unordered_set<std::string_view> required;  // looked up per property, not scanned: lists can be long
  if (const auto r = schema.find("required"); r != schema.end() && r->is_array())
    for (const json& name : *r)
      if (name.is_string()) required.insert(name.get_ref<const std::string&>());
  if (props != schema.end() && props->is_object())
    for (const auto& [key, prop] : props->items()) {
      if (prop.is_object() && prop.contains("description") && prop["description"].is_string())
        comment_lines(out, prop["description"].get_ref<const std::string&>(), indent);
      out << indent << key << (required.contains(key) ? "" : "?") << ": ";
      put_type(out, prop, indent + "    ");
      out << ",";
      if (prop.is_object() && prop.contains("default")) {
        const json& d = prop["default"];
        out << " // default: " << (d.is_string() && prop.contains("enum") ? d.get_ref<const std::string&>() : d.dump());
      }
      out << "\n";
    }
  out << indent << "}";
}

void put_type(Writer& out, const json& schema, const std::string& indent) {
  if (!schema.is_object()) {
    out << "any";
    return;
  }
  if (schema.contains("enum") && schema["enum"].is_array()) {
    const char* sep = "";
    for (const json& v : schema["enum"]) out << sep << v.dump(), sep = " | ";
  } else if (schema.contains("type") && schema["type"].is_array()) {
    const char* sep = "";
    for (const json& v : schema["type"])
      if (v.is_string()) {
        out << sep, sep = " | ";
        put_type(out, json{{"type", v}}, indent);
      }
  } else {
    const std::string type = string_field(schema, "type");
    if (type == "string")
      out << "string";
    else if (type == "number" || type == "integer")
      out << "number";
    else if (type == "boolean")
      out << "boolean";
    else if (type == "null")
      out << "null";
    else if (type == "array" && schema.contains("items"))
      put_type(out, schema["items"], indent), out << "[]";
    else if (type == "array")
      out << "Array<any>";
    else if (type == "object")
      put_object(out, schema, indent);
    else
      out << "any";
  }
  if (bool_field(schema, "nullable", false)) out << " | null";
}

}  // namespace

std::string render_functions(const json& tools, size_t max_bytes) {
  if (!tools.is_array()) throw ApiError(400, "'tools' must be an array of function tools", "tools");
  Writer out(max_bytes);
  for (const json& tool : tools) {
    if (!tool.is_object() || string_field(tool, "type") != "function" || !tool.contains("function") ||
        !tool["function"].is_object())
      throw ApiError(400, "each tool must be {\"type\": \"function\", \"function\": {...}}", "tools");
    const json& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get_ref<const std::string&>().empty())
      throw ApiError(400, "a function tool needs a name", "tools");
    if (f.contains("description") && f["description"].is_string())
      comment_lines(out, f["description"].get_ref<const std::string&>(), "");
    out << "type " << f["name"].get_ref<const std::string&>();
    if (f.contains("parameters") && f["parameters"].is_object()) {
      out << " = (_: ";
      put_type(out, f["parameters"], "");
      out << ") => any;\n\n";
    } else {
      out << " = () => any;\n\n";
    }
  }
  return out.take();
}

}  // namespace tps
