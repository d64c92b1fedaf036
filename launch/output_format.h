// --json-schema FILE and --grammar FILE (GBNF, engine/grammar/gbnf.h): what
// tpsrun's generated text is held to, as the engine's constraint spec
// (engine/sched/constraint_spec.h). Without --chat the raw text is the schema's
// JSON or the grammar's text; with --chat the whole harmony turn is held:
// the analysis under the --reasoning effort's budget, then the final
// message.
#pragma once

#include <optional>

#include "engine/sched/constraint.h"
#include "launch/run_options.h"

namespace tps {

// Registers --json-schema and --grammar (run_group::output_format).
void add_output_format_options(CLI::App& app, RunOptions& run);

// None when neither flag is given. Reads the file and compiles the spec
// into the generator's cache on the calling rank (so a rank compiles it
// once): InputError naming the flag and the file for one that cannot be
// read, is not JSON, or uses what the grammar engine cannot honour (the
// keyword and its path, or the grammar's line).
std::optional<ConstraintSpec> output_format_spec(const RunOptions& options, ConstraintCache& cache);

// The same file as the final answer's content of a harmony turn (kind text
// when neither flag is given), checked the same way: what `tpsrun serve`
// holds the answers of requests that ask for no format of their own to.
ContentSpec output_format_final(const RunOptions& options, ConstraintCache& cache);

}  // namespace tps
