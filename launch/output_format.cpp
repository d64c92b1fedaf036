#include "launch/output_format.h"

#include <nlohmann/json.hpp>

#include "engine/grammar/gbnf.h"
#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "runtime/mapped_file.h"

namespace tps {

void add_output_format_options(CLI::App& app, RunOptions& run) {
  CLI::Option* schema = app.add_option("--json-schema", run.json_schema_file,
                                       "hold the generated text to this JSON Schema's JSON (with --chat: the final "
                                       "message, the analysis free under --reasoning's budget; serve: the final "
                                       "answer of every request that asks for no format)")
                            ->check(CLI::ExistingFile)
                            ->group(run_group::output_format);
  app.add_option("--grammar", run.grammar_file,
                 "hold the generated text to this GBNF grammar (llama.cpp's notation; serve: as --json-schema)")
      ->check(CLI::ExistingFile)
      ->excludes(schema)
      ->group(run_group::output_format);
}

namespace {

using json = nlohmann::ordered_json;

std::string flag_of(const RunOptions& o) {
  return o.json_schema_file.empty() ? cat("--grammar ", o.grammar_file) : cat("--json-schema ", o.json_schema_file);
}

// {"schema": S} or {"gbnf": TEXT} from the file, null without one; the
// grammar's mistakes named by the file's line.
json read_final(const RunOptions& o) {
  if (o.json_schema_file.empty() && o.grammar_file.empty()) return nullptr;
  const bool schema = !o.json_schema_file.empty();
  const std::string text = read_text_file(schema ? o.json_schema_file : o.grammar_file, 1 << 20);
  if (!schema) {
    Grammar scratch;
    add_gbnf(scratch, text, flag_of(o));
    return {{"gbnf", text}};
  }
  try {
    return {{"schema", json::parse(text)}};
  } catch (const json::exception& e) {
    throw InputError(cat(flag_of(o), ": not JSON (", e.what(), ")"));
  }
}

// The spec compiled as every rank will: InputError naming the flag.
void check(const json& spec, const RunOptions& o, const Tokenizer& tokenizer) {
  try {
    ConstraintCache(tokenizer).get(spec.dump());
  } catch (const InputError& e) {
    throw InputError(cat(flag_of(o), ": ", e.what()));
  }
}

json harmony_spec(const json& final, int budget) {
  return {{"format", "harmony"},
          {"analysis", true},
          {"reasoning_budget", budget},
          {"final", final},
          {"tools", json::array()}};
}

}  // namespace

std::string output_format_spec(const RunOptions& o, const Tokenizer& tokenizer) {
  const json content = read_final(o);
  if (content.is_null()) return "";
  json spec;
  if (o.chat)
    spec = harmony_spec(content, effort_budget(o.reasoning));
  else if (content.contains("schema"))
    spec = {{"format", "json_schema"}, {"schema", content["schema"]}};
  else
    spec = {{"format", "gbnf"}, {"gbnf", content["gbnf"]}};
  check(spec, o, tokenizer);
  return spec.dump();
}

json output_format_final(const RunOptions& o, const Tokenizer& tokenizer) {
  const json content = read_final(o);
  if (!content.is_null()) check(harmony_spec(content, effort_budget(o.reasoning)), o, tokenizer);
  return content;
}

}  // namespace tps
