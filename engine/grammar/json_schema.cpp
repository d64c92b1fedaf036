#include "engine/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/grammar/json_text.h"
#include "engine/grammar/matcher.h"
#include "engine/grammar/pattern.h"
#include "runtime/error.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;
using Element = Grammar::Element;

// Keywords that only annotate: ignored. Keywords JSON Schema defines that
// constrain and are not honoured: refused.
const std::set<std::string> kAnnotations = {
    "$schema",          "$id",         "$anchor",  "$comment",   "$defs",    "definitions", "title",
    "description",      "default",     "examples", "deprecated", "readOnly", "writeOnly",   "contentEncoding",
    "contentMediaType", "$vocabulary", "strict"};
const std::set<std::string> kRefused = {"not",
                                        "if",
                                        "then",
                                        "else",
                                        "uniqueItems",
                                        "contains",
                                        "minContains",
                                        "maxContains",
                                        "propertyNames",
                                        "dependentRequired",
                                        "dependentSchemas",
                                        "dependencies",
                                        "unevaluatedProperties",
                                        "unevaluatedItems",
                                        "$dynamicRef",
                                        "$recursiveRef",
                                        "$dynamicAnchor",
                                        "$recursiveAnchor"};
constexpr int kMaxDepth = 64;
constexpr uint32_t kMaxPositions = Grammar::kMaxPositions;
constexpr int kMaxCount = 1000;        // minItems, maxItems (bounded ones): a rule each
constexpr int kMaxLength = 1'000'000;  // minLength, maxLength: a counter on a loop (grammar.h)
// The matcher's work all of an enum's values may take to be checked
// against the keywords beside it: a few tokens' worth (matcher.h).
constexpr uint64_t kCheckWork = 4 * Matcher::kWorkPerToken;

std::string at(const std::string& path) { return cat("schema at ", path.empty() ? "/" : path); }

class SchemaCompiler {
 public:
  SchemaCompiler(Grammar& g, const json& root) : g_(g), text_(g), root_(root) {}

  int compile(const json& s, const std::string& path, int depth = 0) {
    if (depth > kMaxDepth) throw InputError(cat(at(path), ": nested more than ", kMaxDepth, " deep"));
    if (g_.positions() > kMaxPositions)
      throw InputError(cat(at(path), ": the schema makes a grammar of over ", kMaxPositions, " positions"));
    if (s.is_boolean()) {
      if (s.get<bool>()) return text_.any_value();
      if (depth == 0) throw InputError(cat(at(path), ": the schema false accepts nothing"));
      return nothing();  // a branch or a member that cannot be
    }
    if (!s.is_object()) throw InputError(cat(at(path), ": a schema is an object or a boolean, not ", s.type_name()));
    OriginScope origin(g_, at(path));
    for (const auto& [key, value] : s.items()) {
      if (kRefused.count(key) && !(key == "uniqueItems" && value == false))
        throw InputError(cat(at(path), ": '", key, "' is not supported"));
    }
    if (s.contains("$ref")) {
      if (!has_siblings(s, "$ref")) return ref(s["$ref"], path, depth);
      // Keywords beside a $ref apply too: the two merged, as allOf.
      json both = without(s, "$ref");
      both["allOf"] = json::array({json{{"$ref", s["$ref"]}}});
      return compile(both, path, depth + 1);
    }
    if (s.contains("allOf")) {
      const json one = merged(s, path);
      return one == false ? nothing() : compile(one, path, depth + 1);
    }
    // oneOf as anyOf: a grammar cannot forbid that a text match two
    // branches (docs/USAGE.md says so); most oneOfs tell their branches
    // apart by type or by a const, and hold exactly.
    for (const char* k : {"anyOf", "oneOf"})
      if (s.contains(k)) {
        const json& branches = s[k];
        if (!branches.is_array() || branches.empty())
          throw InputError(cat(at(path), ": '", k, "' must be a non-empty array"));
        // Keywords beside it apply to every branch: each merged with them.
        const bool siblings = has_siblings(s, k);
        const int r = g_.declare(k);
        for (size_t i = 0; i < branches.size(); ++i) {
          const std::string where = cat(path, "/", k, "/", i);
          json both = without(s, k);
          both["allOf"] = json::array({branches[i]});
          g_.add_alternative(r, {Grammar::rule(compile(siblings ? both : branches[i], where, depth + 1))});
        }
        return r;
      }
    if (s.contains("const") || s.contains("enum")) return listed(s, path, depth);
    std::vector<std::string> types = types_of(s, path);
    if (types.empty()) return text_.any_value();
    const int r = g_.declare("type");
    for (const std::string& t : types) g_.add_alternative(r, {Grammar::rule(typed(s, t, path, depth))});
    return r;
  }

 private:
  // const or enum: the values listed that the keywords beside them accept
  // (each value's text matched against the rest of the schema compiled on
  // its own), so a value the schema rejects is never written.
  int listed(const json& s, const std::string& path, int depth) {
    const char* key = s.contains("const") ? "const" : "enum";
    OriginScope keyword(g_, cat(at(path), ": '", key, "'"));
    const json values = s.contains("const") ? json::array({s["const"]}) : s["enum"];
    if (!values.is_array() || values.empty()) throw InputError(cat(at(path), ": 'enum' must be a non-empty array"));
    std::vector<std::string> texts;
    try {
      for (const json& v : values) texts.push_back(v.dump());
    } catch (const json::exception& e) {
      throw InputError(cat(at(path), ": '", key, "' holds a value that is not valid JSON text (", e.what(), ")"));
    }
    if (has_siblings(s, key)) {
      Grammar rest;
      const int r = SchemaCompiler(rest, root_).compile(without(s, key), path, depth + 1);
      rest.finish(r);
      Matcher m(std::make_shared<const CompiledGrammar>(CompiledGrammar{std::move(rest), nullptr, {}}), kCheckWork);
      uint64_t work = 0;
      std::erase_if(texts, [&](const std::string& text) {
        const bool kept = m.matches(text);
        if ((work += m.work()) > kCheckWork)
          throw InputError(cat(at(path), ": '", key, "' has too many values to check against the keywords beside it"));
        return !kept;
      });
      if (texts.empty())
        throw InputError(cat(at(path), ": no value of '", key, "' satisfies the keywords beside it, so nothing can"));
    }
    const int r = g_.one_of(key, std::move(texts));
    if (g_.positions() > kMaxPositions)
      throw InputError(cat(at(path), ": '", key, "' makes a grammar of over ", kMaxPositions, " positions"));
    return r;
  }

  // A rule no text matches.
  int nothing() { return g_.sequence("nothing", {g_.bytes(ByteSet())}); }

  static json without(const json& s, const char* key) {
    json out = s;
    out.erase(key);
    return out;
  }
  // Whether s has validation keywords besides `key`.
  static bool has_siblings(const json& s, const char* key) {
    for (const auto& [k, value] : s.items())
      if (k != key && !kAnnotations.count(k) && validating(k)) return true;
    return false;
  }

  static bool validating(const std::string& key) {
    static const std::set<std::string> kKnown = {"type",
                                                 "enum",
                                                 "const",
                                                 "properties",
                                                 "required",
                                                 "additionalProperties",
                                                 "items",
                                                 "prefixItems",
                                                 "minItems",
                                                 "maxItems",
                                                 "minLength",
                                                 "maxLength",
                                                 "pattern",
                                                 "format",
                                                 "minimum",
                                                 "maximum",
                                                 "exclusiveMinimum",
                                                 "exclusiveMaximum",
                                                 "anyOf",
                                                 "oneOf",
                                                 "allOf",
                                                 "$ref",
                                                 "additionalItems",
                                                 "minProperties",
                                                 "maxProperties",
                                                 "patternProperties",
                                                 "multipleOf"};
    return kKnown.count(key) > 0 || kRefused.count(key) > 0;
  }

  // The JSON types a schema names, or implies by its keywords.
  std::vector<std::string> types_of(const json& s, const std::string& path) const {
    static const std::set<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      for (const json& one : t.is_array() ? t : json::array({t})) {
        if (!one.is_string() || !kTypes.count(one.get<std::string>()))
          throw InputError(cat(at(path), ": 'type' ", one.dump(), " is not a JSON Schema type"));
        types.push_back(one);
      }
      if (types.empty()) throw InputError(cat(at(path), ": 'type' names no type"));
      return types;
    }
    auto has = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (s.contains(k)) return true;
      return false;
    };
    if (has({"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties"}))
      types.push_back("object");
    if (has({"items", "prefixItems", "minItems", "maxItems", "additionalItems"})) types.push_back("array");
    if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) types.push_back("number");
    return types;
  }

  int typed(const json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "object") return object(s, path, depth);
    if (t == "array") return array(s, path, depth);
    if (t == "string") return string(s, path);
    if (t == "number" || t == "integer") return number(s, t == "integer", path);
    if (t == "boolean") return text_.boolean();
    return text_.null();
  }

  const json& pointer(const std::string& ref, const std::string& path) const {
    if (ref.empty() || ref[0] != '#')
      throw InputError(cat(at(path), ": '$ref' ", ref, ": only references inside the document (#...) are supported"));
    // A URI fragment: %XX escapes decoded before it is read as a JSON pointer.
    std::string fragment;
    for (size_t i = 1; i < ref.size(); ++i) {
      if (ref[i] == '%' && i + 2 < ref.size() && std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
        fragment += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        fragment += ref[i];
      }
    }
    try {
      return fragment.empty() ? root_ : root_.at(json::json_pointer(fragment));
    } catch (const nlohmann::json::exception&) {
      throw InputError(cat(at(path), ": '$ref' ", ref, " points at nothing in the document"));
    }
  }

  int ref(const json& value, const std::string& path, int depth) {
    if (!value.is_string()) throw InputError(cat(at(path), ": '$ref' must be a string"));
    const std::string target = value;
    auto it = refs_.find(target);
    if (it != refs_.end()) return it->second;
    // Declared before it is compiled, so that recursion finds it.
    const int r = g_.declare("ref " + target);
    refs_.emplace(target, r);
    g_.add_alternative(r, {Grammar::rule(compile(pointer(target, path), target.substr(1), depth + 1))});
    return r;
  }

  // allOf, and the schema around it, as one schema: objects' properties
  // and required joined, other keywords taken when only one branch says
  // them (or all say the same).
  json merged(const json& s, const std::string& path) const {
    json out = json::object();
    std::vector<const json*> parts{&s};
    const json& all = s["allOf"];
    if (!all.is_array() || all.empty()) throw InputError(cat(at(path), ": 'allOf' must be a non-empty array"));
    for (const json& b : all)
      parts.push_back(
          b.is_object() && b.contains("$ref") && b.size() == 1 ? &pointer(b["$ref"].get<std::string>(), path) : &b);
    for (const json* part : parts) {
      if (*part == true) continue;
      if (!part->is_object()) return json(false);  // nothing can match every branch
      if (part != &s && part->contains("$ref"))
        throw InputError(cat(at(path), ": 'allOf' branches with '$ref' beside other keywords are not supported"));
      for (const auto& [key, value] : part->items()) {
        if (part == &s && key == "allOf") continue;
        if (kAnnotations.count(key)) continue;
        if (key == "properties") {
          for (const auto& [name, schema] : value.items()) {
            if (out["properties"].contains(name) && out["properties"][name] != schema)
              throw InputError(cat(at(path), ": 'allOf' branches give property '", name, "' two schemas"));
            out["properties"][name] = schema;
          }
        } else if (key == "required") {
          for (const json& name : value)
            if (!out.contains("required") ||
                std::find(out["required"].begin(), out["required"].end(), name) == out["required"].end())
              out["required"].push_back(name);
        } else if (out.contains(key) && out[key] != value) {
          throw InputError(cat(at(path), ": 'allOf' branches disagree on '", key, "'"));
        } else {
          out[key] = value;
        }
      }
    }
    return out;
  }

  int count(const json& s, const char* key, int fallback, int limit, const std::string& path) const {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      throw InputError(cat(at(path), ": '", key, "' must be a non-negative integer"));
    if (v.get<int64_t>() > limit) throw InputError(cat(at(path), ": '", key, "' above ", limit, " is not supported"));
    return v.get<int>();
  }

  // patternProperties: for each pattern, its member rule (a name the
  // pattern matches, the value its schema), and a matcher of names (for
  // the names listed or required, whose values must satisfy it too).
  struct NamePattern {
    std::string where;
    std::unique_ptr<Matcher> names;
    json schema;
    int member;
  };
  std::vector<NamePattern> name_patterns(const json& s, const std::string& path, int depth) {
    std::vector<NamePattern> out;
    if (!s.contains("patternProperties")) return out;
    if (!s["patternProperties"].is_object()) throw InputError(cat(at(path), ": 'patternProperties' must be an object"));
    for (const auto& [pattern, schema] : s["patternProperties"].items()) {
      const std::string where = cat(path, "/patternProperties/", pattern);
      Grammar alone;
      JsonText alone_text(alone);
      alone.finish(pattern_rule(alone, alone_text, pattern, at(where)));
      OriginScope keyword(g_, cat(at(where), ": 'patternProperties'"));
      const int name = text_.quoted(pattern_rule(g_, text_, pattern, at(where)));
      const int value = compile(schema, where, depth + 1);
      out.push_back(
          {where,
           std::make_unique<Matcher>(
               std::make_shared<const CompiledGrammar>(CompiledGrammar{std::move(alone), nullptr, {}}), kCheckWork),
           schema,
           g_.sequence("member", {Grammar::rule(name), text_.ws(), g_.byte(':'), text_.ws(), Grammar::rule(value)})});
    }
    return out;
  }

  // A named member's value: its schema (or none) and the schemas of the
  // patterns its name matches (`matched` set then), all held.
  int member_value(const std::string& name, const json* schema, const std::vector<NamePattern>& patterns,
                   const std::string& where, int depth, bool& matched) {
    json all = json::array();
    if (schema) all.push_back(*schema);
    const std::string text = json(name).dump();
    for (const NamePattern& p : patterns)
      if (p.names->matches(std::string_view(text).substr(1, text.size() - 2))) all.push_back(p.schema), matched = true;
    if (all.empty()) return text_.any_value();
    return compile(all.size() == 1 ? all[0] : json{{"allOf", all}}, where, depth + 1);
  }

  int object(const json& s, const std::string& path, int depth) {
    struct Member {
      std::string name;
      bool required;
      int rule;
    };
    std::vector<Member> members;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) throw InputError(cat(at(path), ": 'required' must be an array of names"));
      for (const json& n : s["required"]) {
        if (!n.is_string()) throw InputError(cat(at(path), ": 'required' must be an array of names"));
        required.insert(n.get<std::string>());
      }
    }
    const json extra = s.contains("additionalProperties") ? s["additionalProperties"] : json(false);
    const std::vector<NamePattern> patterns = name_patterns(s, path, depth);
    if (!patterns.empty() && extra != false)
      throw InputError(cat(at(path),
                           ": 'patternProperties' beside 'additionalProperties' other than false is not "
                           "supported (an additional name must match no pattern)"));
    auto member = [&](const std::string& name, int value) {
      return g_.sequence("member", {Grammar::rule(text_.value(json(name))), text_.ws(), g_.byte(':'), text_.ws(),
                                    Grammar::rule(value)});
    };
    std::set<std::string> listed;
    bool named = false;  // a listed or required name matches a pattern
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) throw InputError(cat(at(path), ": 'properties' must be an object"));
      for (const auto& [name, schema] : s["properties"].items()) {
        listed.insert(name);
        const std::string where = cat(path, "/properties/", name);
        members.push_back(
            {name, required.count(name) > 0, member(name, member_value(name, &schema, patterns, where, depth, named))});
      }
    }
    // A required property 'properties' does not list takes any value, or
    // additionalProperties' schema or the patterns' (the default false is
    // tps's narrowing of members it writes, not a rule against this one).
    for (const std::string& name : required)
      if (!listed.count(name)) {
        if (s.contains("additionalProperties") && extra == false)
          throw InputError(cat(at(path), ": required property '", name,
                               "' is not in 'properties' and 'additionalProperties' is false: nothing matches"));
        const json* schema = extra.is_object() ? &extra : nullptr;
        members.push_back({name, true, member(name, member_value(name, schema, patterns, path, depth, named))});
      }
    // Extra members, after the listed ones: additional, or named by a pattern.
    std::optional<int> extra_member;
    if (extra != false)
      extra_member = g_.sequence(
          "member", {Grammar::rule(text_.any_string()), text_.ws(), g_.byte(':'), text_.ws(),
                     Grammar::rule(extra == true ? text_.any_value()
                                                 : compile(extra, path + "/additionalProperties", depth + 1))});
    // Of one pattern only, that no listed or required name matches: a name
    // matching two patterns must satisfy both schemas, and a listed name
    // its own schema too, which one member rule cannot say (otherwise none
    // is written: a narrowing).
    if (patterns.size() == 1 && !named) extra_member = patterns[0].member;
    // min/maxProperties: optional members made required in order, or left
    // out from the last, as the bounds need (a narrowing); extra members
    // written as many as minProperties still needs.
    int count_required = static_cast<int>(required.size());
    const int least = count(s, "minProperties", 0, kMaxCount, path);
    for (Member& m : members)
      if (count_required < least && !m.required) m.required = true, ++count_required;
    const int extra_needed = std::max(0, least - count_required);
    if (extra_needed > 0 && !extra_member)
      throw InputError(cat(at(path), ": 'minProperties' ", least, ": fewer properties than that can be written"));
    const int most = count(s, "maxProperties", -1, kMaxCount, path);
    if (most >= 0) {
      if (extra_member)
        throw InputError(cat(at(path), ": 'maxProperties' beside additional or pattern properties is not supported"));
      if (count_required > most) throw InputError(cat(at(path), ": more properties required than 'maxProperties'"));
      for (size_t i = members.size(); i-- > 0 && static_cast<int>(members.size()) > most;)
        if (!members[i].required) members.erase(members.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const int comma = g_.sequence("comma", {text_.ws(), g_.byte(','), text_.ws()});
    // rest[i][h]: the members from i on, h: one came before (a comma first).
    std::map<std::pair<size_t, bool>, int> rest;
    std::function<int(size_t, bool)> from = [&](size_t i, bool after) -> int {
      auto [it, added] = rest.try_emplace({i, after}, -1);
      if (!added) return it->second;
      const int r = it->second = g_.declare(cat("members", i));
      std::vector<Element> sep;
      if (after) sep.push_back(Grammar::rule(comma));
      if (i == members.size()) {
        if (extra_needed == 0) g_.add_alternative(r, {});
        if (extra_member) {
          std::vector<Element> e = sep;
          e.push_back(Grammar::rule(*extra_member));
          e.push_back(Grammar::rule(g_.repeat(
              "more", Grammar::rule(g_.sequence("more", {Grammar::rule(comma), Grammar::rule(*extra_member)})),
              std::max(0, extra_needed - 1), -1)));
          g_.add_alternative(r, e);
        }
        return r;
      }
      std::vector<Element> e = sep;
      e.push_back(Grammar::rule(members[i].rule));
      e.push_back(Grammar::rule(from(i + 1, true)));
      g_.add_alternative(r, e);
      if (!members[i].required) g_.add_alternative(r, {Grammar::rule(from(i + 1, after))});
      return r;
    };
    return g_.sequence("object", {g_.byte('{'), text_.ws(), Grammar::rule(from(0, false)), text_.ws(), g_.byte('}')});
  }

  int array(const json& s, const std::string& path, int depth) {
    std::vector<int> prefix;
    const json* prefix_items = s.contains("prefixItems")                      ? &s["prefixItems"]
                               : s.contains("items") && s["items"].is_array() ? &s["items"]
                                                                              : nullptr;
    if (prefix_items) {
      if (!prefix_items->is_array()) throw InputError(cat(at(path), ": 'prefixItems' must be an array"));
      for (size_t i = 0; i < prefix_items->size(); ++i)
        prefix.push_back(compile((*prefix_items)[i], cat(path, "/prefixItems/", i), depth + 1));
    }
    std::optional<int> item;
    const bool tuple_items = s.contains("items") && s["items"].is_array();
    if (s.contains("items") && !tuple_items) {
      if (s["items"] != false) item = compile(s["items"], path + "/items", depth + 1);
    } else if (!tuple_items) {
      item = text_.any_value();
    } else if (s.contains("additionalItems") && s["additionalItems"] != false) {  // draft 7: after the tuple
      item = compile(s["additionalItems"], path + "/additionalItems", depth + 1);
    }
    const int min = count(s, "minItems", 0, kMaxCount, path);
    const int max = count(s, "maxItems", -1, kMaxCount, path);
    if (max >= 0 && max < min) throw InputError(cat(at(path), ": 'maxItems' is below 'minItems'"));
    const int comma = g_.sequence("comma", {text_.ws(), g_.byte(','), text_.ws()});
    // items(i): the items from index i on.
    std::function<int(int)> items = [&](int i) -> int {
      const int r = g_.declare(cat("items", i));
      const std::optional<int> here = i < static_cast<int>(prefix.size()) ? std::optional<int>(prefix[i]) : item;
      if (i >= min) g_.add_alternative(r, {});
      if (here && (max < 0 || i < max)) {
        std::vector<Element> e;
        if (i > 0) e.push_back(Grammar::rule(comma));
        e.push_back(Grammar::rule(*here));
        // Past the prefix and the minimum, the same item repeats.
        if (i + 1 >= static_cast<int>(prefix.size()) && i + 1 >= min && item) {
          e.push_back(Grammar::rule(
              g_.repeat("more", Grammar::rule(g_.sequence("more", {Grammar::rule(comma), Grammar::rule(*item)})), 0,
                        max < 0 ? -1 : max - (i + 1))));
        } else {
          e.push_back(Grammar::rule(items(i + 1)));
        }
        g_.add_alternative(r, e);
      }
      if (g_.alternatives(r).empty())
        throw InputError(cat(at(path), ": no array satisfies 'minItems' ", min, " with these items"));
      return r;
    };
    return g_.sequence("array", {g_.byte('['), text_.ws(), Grammar::rule(items(0)), text_.ws(), g_.byte(']')});
  }

  int string(const json& s, const std::string& path) {
    const int min = count(s, "minLength", 0, kMaxLength, path);
    const int max = count(s, "maxLength", -1, kMaxLength, path);
    if (max >= 0 && max < min) throw InputError(cat(at(path), ": 'maxLength' is below 'minLength'"));
    int formatted = -1;  // a format held (one JSON Schema does not define constrains nothing)
    if (s.contains("format")) {
      if (!s["format"].is_string()) throw InputError(cat(at(path), ": 'format' must be a string"));
      formatted = format_rule(g_, text_, s["format"], at(path), min, max);
    }
    if (s.contains("pattern")) {
      if (formatted >= 0) throw InputError(cat(at(path), ": 'pattern' and 'format' together are not supported"));
      if (!s["pattern"].is_string()) throw InputError(cat(at(path), ": 'pattern' must be a string"));
      OriginScope keyword(g_, cat(at(path), ": 'pattern'"));
      const int r = pattern_rule(g_, text_, s["pattern"], at(path), min, max);
      g_.add_probe(r);
      return text_.quoted(r);
    }
    return formatted >= 0 ? text_.quoted(formatted) : text_.string_of_length(min, max);
  }

  int number(const json& s, bool integer, const std::string& path) {
    std::optional<NumberBound> lo, hi;
    auto bound = [&](const char* plain, const char* exclusive, std::optional<NumberBound>& out, bool upper) {
      if (s.contains(plain)) {
        if (!s[plain].is_number()) throw InputError(cat(at(path), ": '", plain, "' must be a number"));
        out = NumberBound{s[plain].get<double>(), false};
      }
      if (s.contains(exclusive)) {
        const json& e = s[exclusive];
        if (e.is_boolean()) {  // draft 4: a flag on the plain bound
          if (out) out->exclusive = e.get<bool>();
        } else if (e.is_number()) {
          const double v = e.get<double>();
          if (!out || (upper ? v <= out->value : v >= out->value)) out = NumberBound{v, true};
        } else {
          throw InputError(cat(at(path), ": '", exclusive, "' must be a number"));
        }
      }
    };
    bound("minimum", "exclusiveMinimum", lo, false);
    bound("maximum", "exclusiveMaximum", hi, true);
    // multipleOf 1, 0.1, 0.01, ...: numbers of at most that many fraction
    // digits (every multiple of 10^-d written so); other steps are refused.
    int fraction_digits = -1;
    if (s.contains("multipleOf")) {
      const json& m = s["multipleOf"];
      if (!m.is_number() || !(m.get<double>() > 0))
        throw InputError(cat(at(path), ": 'multipleOf' must be a number above 0"));
      for (int d = 0; d <= 15 && fraction_digits < 0; ++d)
        if (std::fabs(m.get<double>() * std::pow(10.0, d) - 1) < 1e-9) fraction_digits = d;
      if (fraction_digits < 0)  // (an integer is a multiple of every one of these)
        throw InputError(cat(at(path), ": 'multipleOf' ", m.dump(), " is not supported (1, 0.1, 0.01, ... are)"));
    }
    if (!integer) return text_.number(lo, hi, at(path), fraction_digits);
    // Bounds past the integers written are refused, not dropped: a
    // minimum above them leaves nothing to write (below them, the integers
    // written all lie inside).
    const double cap = static_cast<double>(JsonText::kLargestMagnitude);
    std::optional<int64_t> a, b;
    if (lo) {
      const double v = lo->exclusive ? std::floor(lo->value) + 1 : std::ceil(lo->value);
      if (v > cap)
        throw InputError(cat(at(path), ": '", lo->exclusive ? "exclusiveMinimum" : "minimum", "' ", lo->value,
                             " on an integer: integers of up to 15 digits are written"));
      a = static_cast<int64_t>(std::max(-cap, v));
    }
    if (hi) {
      const double v = hi->exclusive ? std::ceil(hi->value) - 1 : std::floor(hi->value);
      if (v < -cap)
        throw InputError(cat(at(path), ": '", hi->exclusive ? "exclusiveMaximum" : "maximum", "' ", hi->value,
                             " on an integer: integers of up to 15 digits are written"));
      b = static_cast<int64_t>(std::min(cap, v));
    }
    if (a && b && *a > *b) throw InputError(cat(at(path), ": no integer lies within the bounds"));
    return text_.integer(a, b);
  }

  Grammar& g_;
  JsonText text_;
  const json& root_;
  std::map<std::string, int> refs_;
};

}  // namespace

int add_json_schema(Grammar& g, const nlohmann::ordered_json& schema) {
  return SchemaCompiler(g, schema).compile(schema, "");
}

int add_json_object(Grammar& g) { return JsonText(g).any_object(); }

}  // namespace tps
