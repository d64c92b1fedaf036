#include "engine/sched/constraint_spec.h"

#include <algorithm>
#include <array>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/harmony_turn.h"
#include "engine/grammar/json_schema.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

constexpr std::array<const char*, 5> kKindNames = {"text", "none", "json_object", "json_schema", "gbnf"};

json content_json(const ContentSpec& c) {
  json j = {{"kind", kKindNames[static_cast<size_t>(c.kind)]}};
  if (c.kind == ContentSpec::Kind::json_schema) j["schema"] = c.schema;
  if (c.kind == ContentSpec::Kind::gbnf) j["gbnf"] = c.gbnf;
  return j;
}

ContentSpec content_of(const json& j) {
  ContentSpec c;
  const std::string kind = j.at("kind").get<std::string>();
  size_t k = 0;
  while (k < kKindNames.size() && kind != kKindNames[k]) ++k;
  if (k == kKindNames.size()) throw InputError(cat("a constraint's content of kind '", kind, "'"));
  c.kind = static_cast<ContentSpec::Kind>(k);
  if (c.kind == ContentSpec::Kind::json_schema) c.schema = j.at("schema");
  if (c.kind == ContentSpec::Kind::gbnf) c.gbnf = j.at("gbnf").get<std::string>();
  return c;
}

// The content's rule in g (none for any text), refused by its param.
std::optional<int> add_content(Grammar& g, const ContentSpec& c) {
  try {
    switch (c.kind) {
      case ContentSpec::Kind::text:
      case ContentSpec::Kind::none: return std::nullopt;
      case ContentSpec::Kind::json_object: return add_json_object(g);
      case ContentSpec::Kind::json_schema: return add_json_schema(g, c.schema);
      case ContentSpec::Kind::gbnf: return add_gbnf(g, c.gbnf, "");
    }
  } catch (const json::exception& e) {
    throw ConstraintError(c.param, cat("a field of the wrong type (", e.what(), ")"));
  } catch (const InputError& e) {
    throw ConstraintError(c.param, e.what());
  }
  return std::nullopt;
}

// A harmony turn's rules in g; its start rule, or none when it holds
// nothing. Loose tools' schemas are held when `loose` and they can be.
std::optional<int> add_turn(Grammar& g, const ConstraintSpec& spec, const Tokenizer& tok, bool loose,
                            std::vector<std::string>& unheld) {
  HarmonyTurn turn;
  turn.final_answer = spec.content.kind != ContentSpec::Kind::none;
  turn.final_content = add_content(g, spec.content);
  turn.final_json = spec.content.kind != ContentSpec::Kind::gbnf;
  // A turn that asks nothing but its loose tools' schemas holds nothing
  // when none of them can be held.
  bool held = spec.asks() || std::none_of(spec.tools.begin(), spec.tools.end(), [](const ConstraintSpec::Tool& t) {
                return !t.strict && t.arguments.kind == ContentSpec::Kind::json_schema;
              });
  for (const ConstraintSpec::Tool& t : spec.tools) {
    HarmonyTurn::Tool tool{t.name, std::nullopt};
    if (t.arguments.kind == ContentSpec::Kind::json_schema && t.strict) {
      tool.arguments = add_content(g, t.arguments);
    } else if (t.arguments.kind == ContentSpec::Kind::json_schema && loose) {
      // Tried on a copy, so that what a schema added before it was refused
      // does not stay behind.
      Grammar trial = g;
      try {
        tool.arguments = add_content(trial, t.arguments);
        g = std::move(trial);
        held = true;
      } catch (const ConstraintError&) {
        unheld.push_back(t.name);  // any JSON object
      }
    } else if (t.arguments.kind == ContentSpec::Kind::json_schema) {
      unheld.push_back(t.name);
    }
    turn.tools.push_back(tool);
  }
  if (!held) return std::nullopt;
  try {
    return add_harmony_turn(g, tok, turn);
  } catch (const InputError& e) {
    throw ConstraintError("", e.what());
  }
}

}  // namespace

bool ConstraintSpec::asks() const {
  if (form == Form::raw || content.kind != ContentSpec::Kind::text) return true;
  for (const Tool& t : tools)
    if (t.strict) return true;
  return false;
}

std::string ConstraintSpec::text() const {
  json tools_json = json::array();
  for (const Tool& t : tools)
    tools_json.push_back({{"name", t.name}, {"arguments", content_json(t.arguments)}, {"strict", t.strict}});
  return json{{"form", form == Form::raw ? "raw" : "harmony"},
              {"content", content_json(content)},
              {"reasoning_budget", reasoning_budget},
              {"tools", tools_json}}
      .dump();
}

ConstraintSpec ConstraintSpec::parse(std::string_view text) {
  try {
    const json j = json::parse(text);
    ConstraintSpec s;
    const std::string form = j.at("form").get<std::string>();
    if (form != "raw" && form != "harmony") throw InputError(cat("a constraint of form '", form, "'"));
    s.form = form == "raw" ? Form::raw : Form::harmony;
    s.content = content_of(j.at("content"));
    s.reasoning_budget = j.at("reasoning_budget").get<int>();
    for (const json& t : j.at("tools"))
      s.tools.push_back(
          Tool{t.at("name").get<std::string>(), content_of(t.at("arguments")), t.at("strict").get<bool>()});
    return s;
  } catch (const json::exception& e) {
    throw InputError(cat("a constraint spec that ConstraintSpec::text did not write (", e.what(), ")"));
  }
}

int32_t harmony_special(const Tokenizer& tok, const char* name) {
  const std::optional<int32_t> id = tok.special_id(name);
  if (!id) throw InputError(cat("the vocabulary has no ", name, ": constrained output needs harmony's tokens"));
  return *id;
}

CompiledConstraint compile_constraint(const ConstraintSpec& spec, const Tokenizer& tok,
                                      std::shared_ptr<const TokenIndex> index) {
  CompiledConstraint out;
  if (spec.form == ConstraintSpec::Form::raw) {
    if (spec.content.kind == ContentSpec::Kind::text || spec.content.kind == ContentSpec::Kind::none)
      throw ConstraintError(spec.content.param, "a raw constraint needs a JSON object, a JSON Schema or a grammar");
    Grammar g;
    const int start = *add_content(g, spec.content);
    try {
      out.grammar = compile_grammar(std::move(g), start, std::move(index),
                                    {harmony_special(tok, "<|return|>"), harmony_special(tok, "<|endoftext|>")});
    } catch (const InputError& e) {
      throw ConstraintError(spec.content.param, e.what());
    }
  } else {
    out.reasoning_budget = spec.reasoning_budget;
    // Loose tools' schemas are held as long as the whole stays within the
    // matcher's work limit: past it, they are dropped (their arguments any
    // JSON object) before the request is refused.
    for (const bool loose : {true, false}) {
      Grammar g;
      out.unheld_tools.clear();
      const std::optional<int> start = add_turn(g, spec, tok, loose, out.unheld_tools);
      if (!start) break;
      try {
        out.grammar = compile_grammar(std::move(g), *start, index, {});
        break;
      } catch (const GrammarTooCostly& e) {
        if (!loose) throw ConstraintError("", e.what());
      } catch (const InputError& e) {
        throw ConstraintError("", e.what());
      }
    }
  }
  return out;
}

}  // namespace tps
