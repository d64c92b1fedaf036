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
                                       "message, the analysis free under --reasoning's budget)")
                            ->check(CLI::ExistingFile)
                            ->group(run_group::output_format);
  app.add_option("--grammar", run.grammar_file, "hold the generated text to this GBNF grammar (llama.cpp's notation)")
      ->check(CLI::ExistingFile)
      ->excludes(schema)
      ->group(run_group::output_format);
}

std::string output_format_spec(const RunOptions& o, const Tokenizer& tokenizer) {
  using json = nlohmann::ordered_json;
  if (o.json_schema_file.empty() && o.grammar_file.empty()) return "";
  const bool schema = !o.json_schema_file.empty();
  const std::string flag = schema ? cat("--json-schema ", o.json_schema_file) : cat("--grammar ", o.grammar_file);
  const std::string text = read_text_file(schema ? o.json_schema_file : o.grammar_file, 1 << 20);
  json content;
  if (schema) {
    try {
      content = {{"schema", json::parse(text)}};
    } catch (const json::exception& e) {
      throw InputError(cat(flag, ": not JSON (", e.what(), ")"));
    }
  } else {
    Grammar scratch;  // its mistakes named by the file's line
    add_gbnf(scratch, text, flag);
    content = {{"gbnf", text}};
  }
  json spec;
  if (o.chat)
    spec = {{"format", "harmony"},
            {"analysis", true},
            {"reasoning_budget", effort_budget(o.reasoning, o.max_new_tokens)},
            {"final", content},
            {"tools", json::array()}};
  else if (schema)
    spec = {{"format", "json_schema"}, {"schema", content["schema"]}};
  else
    spec = {{"format", "gbnf"}, {"gbnf", text}};
  try {
    ConstraintCache(tokenizer).get(spec.dump());
  } catch (const InputError& e) {
    throw InputError(cat(flag, ": ", e.what()));
  }
  return spec.dump();
}

}  // namespace tps
