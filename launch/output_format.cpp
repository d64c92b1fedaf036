#include "launch/output_format.h"

#include <nlohmann/json.hpp>

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

// The file's schema or grammar (kind text without one), its param the flag.
ContentSpec read_content(const RunOptions& o) {
  ContentSpec c;
  if (o.json_schema_file.empty() && o.grammar_file.empty()) return c;
  c.param = flag_of(o);
  if (!o.grammar_file.empty()) {
    c.kind = ContentSpec::Kind::gbnf, c.gbnf = read_text_file(o.grammar_file, 1 << 20);
    return c;
  }
  c.kind = ContentSpec::Kind::json_schema;
  try {
    c.schema = json::parse(read_text_file(o.json_schema_file, 1 << 20));
  } catch (const json::exception& e) {
    throw InputError(cat(c.param, ": not JSON (", e.what(), ")"));
  }
  return c;
}

ConstraintSpec harmony_spec(const ContentSpec& final, const RunOptions& o) {
  ConstraintSpec s;
  s.form = ConstraintSpec::Form::harmony, s.content = final, s.reasoning_budget = effort_budget(o.reasoning);
  return s;
}

// Compiled as every rank will: InputError naming the flag.
void check(const ConstraintSpec& spec, const RunOptions& o, ConstraintCache& cache) {
  try {
    cache.get(spec);
  } catch (const ConstraintError& e) {
    throw InputError(cat(flag_of(o), ": ", e.reason()));
  }
}

}  // namespace

std::optional<ConstraintSpec> output_format_spec(const RunOptions& o, ConstraintCache& cache) {
  const ContentSpec content = read_content(o);
  if (content.kind == ContentSpec::Kind::text) return std::nullopt;
  ConstraintSpec spec;
  if (o.chat)
    spec = harmony_spec(content, o);
  else
    spec.content = content;
  check(spec, o, cache);
  return spec;
}

ContentSpec output_format_final(const RunOptions& o, ConstraintCache& cache) {
  const ContentSpec content = read_content(o);
  if (content.kind != ContentSpec::Kind::text) check(harmony_spec(content, o), o, cache);
  return content;
}

}  // namespace tps
