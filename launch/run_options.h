// What `tpsrun` is asked to do: the options of generation and scoring, the
// same on every rank.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/quantize_plan.h"
#include "engine/sched/generator.h"
#include "engine/step/sampler.h"

namespace tps {

// What --split auto picks: the mode measured fastest here (docs/PERFORMANCE.md).
constexpr SplitMode kAutoSplit = SplitMode::tensor;

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string prompt_file;   // -f: the whole file ("-": standard input) is the prompt
  std::string prompts_file;  // one prompt per line, each a sequence
  int parallel = 1;          // sequences running at once (without a prompts file: sequences of -p)
  int max_new_tokens = 256;  // -n: tokens to generate at most
  SamplerParams sampler;
  bool seed_given = false;
  int context = 4096;                                // --ctx: positions a sequence may reach
  bool context_given = false;                        // without --ctx: score the ids' length, serve and chat
                                                     // default_context (launch/rank_memory.h)
  int step_tokens = GeneratorOptions{}.step_tokens;  // --batch: tokens a forward step takes at most
  bool chat = false;
  bool show_analysis = false;
  std::string reasoning = "medium";
  bool json = false;
  int top_logprobs = 0;
  bool yarn_truncate = false;
  SplitMode split = kAutoSplit;     // --split
  std::string exchange = "auto";    // shm, mpi or auto
  bool keep_page_cache = false;     // leave the model file in the page cache
  std::string ids_file;             // score: the token sequence
  QuantizePlan quantize;            // --quantize: weights converted at load (model/quantize_plan.h)
  std::string kv_size;              // the KV pool: positions, or bytes per rank with a K/M/G suffix; "": ctx x parallel
  KvType kv_type = kDefaultKvType;  // its keys' and values' type (kernels/kv_format.h)
  bool no_prefix_cache = false;     // never reuse cached prompt prefixes
  std::string speculate = "auto";   // drafted tokens checked a step: off, auto or the most (parse_speculate)
  std::string cache_ram;            // the prompt cache's RAM tier per rank: MiB, or bytes with K/M/G; 0 or "": none
                                    // ("" with --cache-dir: default_cache_ram, launch/rank_memory.h)
  bool cache_ram_default = false;   // cache_ram is that default
  std::string cache_dir;            // its disk tier's directory ("": none)
  std::string alias;                // serve: the model's id in the API (default: the file's name)
  std::string json_schema_file;     // generated text held to this JSON Schema (launch/output_format.h)
  std::string grammar_file;         // or to this GBNF grammar
};

// --kv-size as GeneratorOptions takes it: "16384" (positions) or "2G",
// "512M", "64K" (bytes per rank; powers of 1024). Throws InputError naming
// the flag for anything else.
void parse_kv_size(const std::string& text, int& positions, uint64_t& bytes);
// --cache-ram: MiB (a plain number) or bytes with K/M/G; "0" or "": none.
// With --cache-dir and without it, the RAM tier is at most this
// (default_cache_ram, launch/rank_memory.h).
constexpr uint64_t kDefaultCacheRam = uint64_t{4} << 30;
uint64_t parse_cache_ram(const std::string& text);
// --speculate into GeneratorOptions' draft_tokens and draft_by_cost: off
// (0), auto (up to kAutoDraftTokens, as the cost says) or N (1..Drafter's
// longest: every proposal, up to N tokens).
void parse_speculate(const std::string& text, GeneratorOptions& options);

// Typed options, each parsed once, as the command line is (for tpsrun and
// tpstopo alike), its names said by the one list they come from:
// --quantize into a plan (model/quantize_plan.h), --kv-type into a KvType
// (kernels/kv_format.h), --split into a SplitMode (topology/model_shape.h).
CLI::Option* add_quantize_option(CLI::App& app, QuantizePlan& plan, const std::string& help);
CLI::Option* add_kv_type_option(CLI::App& app, KvType& type, const std::string& help);
CLI::Option* add_split_option(CLI::App& app, SplitMode& mode, const std::string& help);

// The generator's options these ask for.
GeneratorOptions generator_options(const RunOptions& options);

// The groups tpsrun's options are registered in: --help shows them by
// group, and each subcommand allows the groups it uses and refuses an
// option of any other (one that would do nothing there).
namespace run_group {
inline const std::string model = "Model and ranks";
inline const std::string sequences = "Sequences at once";
inline const std::string prefix_cache = "Prefix cache";
inline const std::string speculation = "Speculative decoding";
inline const std::string sampling = "Sampling";
inline const std::string prompt = "Prompt";
inline const std::string chat_format = "Chat format (with --chat)";
inline const std::string output = "Output";
inline const std::string logprobs = "Log-probabilities";
inline const std::string output_format = "Output format (launch/output_format.h)";
}  // namespace run_group

// The options given to tpsrun that the rest of the command line is checked
// against.
struct RunFlags {
  CLI::Option *model, *prompt, *prompt_file, *prompts_file, *parallel, *seed, *context;
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
