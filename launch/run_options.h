// What `tpsrun` is asked to do: the options of generation and scoring, the
// same on every rank.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/sched/generator.h"
#include "engine/step/sampler.h"
#include "engine/step/session.h"

namespace tps {

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string prompts_file;  // one prompt per line, each a sequence
  int parallel = 1;          // sequences running at once (without a prompts file: sequences of -p)
  int max_tokens = 256;
  SamplerParams sampler;
  bool seed_given = false;
  int ctx = 4096;
  bool ctx_given = false;  // score: without --ctx, the context is the ids' length
  int batch = SessionOptions{}.max_batch;
  bool chat = false;
  bool show_analysis = false;
  std::string reasoning = "medium";
  bool json = false;
  int top_logprobs = 0;
  bool yarn_truncate = false;
  std::string split = "auto";     // layers, experts, tensor or auto
  std::string exchange = "auto";  // shm, mpi or auto
  bool keep_page_cache = false;   // leave the model file in the page cache
  std::string ids_file;           // score: the token sequence
  std::string quantize;           // --quantize: weights converted at load (model/quantize_plan.h)
  std::string kv_size;            // the KV pool: positions, or bytes per rank with a K/M/G suffix; "": ctx x parallel
  std::string kv_type;            // its keys' and values' type (kernels/kv_format.h); "": the default
  bool no_prefix_cache = false;   // never reuse cached prompt prefixes
  std::string alias;              // serve: the model's id in the API (default: the file's name)
};

// --kv-size as GeneratorOptions takes it: "16384" (positions) or "2G",
// "512M", "64K" (bytes per rank; powers of 1024). Throws InputError naming
// the flag for anything else.
void parse_kv_size(const std::string& text, int& positions, uint64_t& bytes);

// --quantize's text checked as the command line is parsed
// (model/quantize_plan.h's parse_quantize), for tpsrun and tpstopo.
extern const CLI::Validator kQuantizeSpec;
// --kv-type's text checked likewise; kv_type() its value ("": the default).
extern const CLI::Validator kKvTypeName;
KvType kv_type(const std::string& text);

// The generator's options these ask for.
GeneratorOptions generator_options(const RunOptions& options);

// The groups tpsrun's options are registered in: --help shows them by
// group, and each subcommand allows the groups it uses and refuses an
// option of any other (one that would do nothing there).
namespace run_group {
inline const std::string model = "Model and ranks";
inline const std::string sequences = "Sequences at once";
inline const std::string prefix_cache = "Prefix cache";
inline const std::string sampling = "Sampling";
inline const std::string prompt = "Prompt";
inline const std::string chat_format = "Chat format (with --chat)";
inline const std::string output = "Output";
inline const std::string logprobs = "Log-probabilities";
}  // namespace run_group

// The options given to tpsrun that the rest of the command line is checked
// against.
struct RunFlags {
  CLI::Option *model, *prompt, *prompts_file, *parallel, *seed, *context;
};
// Registers the options of generation and scoring on app, into run.
RunFlags add_run_options(CLI::App& app, RunOptions& run);
// A subcommand and the groups of app's options it uses.
struct RunMode {
  CLI::App* command;
  std::vector<std::string> groups;
};
// Throws CLI::ValidationError for an option of app given in a group of
// add_run_options that `allowed` leaves out, saying it does nothing `where`.
void refuse_other_groups(const CLI::App& app, const std::vector<std::string>& allowed, const std::string& where);

}  // namespace tps
