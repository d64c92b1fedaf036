#include "launch/run_options.h"

#include <algorithm>

#include "engine/model/quantize_plan.h"
#include "launch/cli.h"
#include "runtime/error.h"
#include "topology/machine.h"

namespace tps {
namespace {

void add_sampling_options(CLI::App& app, RunOptions& run) {
  const std::string& g = run_group::sampling;
  app.add_option("-n,--max-tokens", run.max_new_tokens, "tokens to generate at most")->capture_default_str()->group(g);
  app.add_option("--temp", run.sampler.temperature, "sampling temperature; 0 = greedy")
      ->capture_default_str()
      ->group(g);
  app.add_option("--top-k", run.sampler.top_k, "keep the k most likely tokens; 0 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--top-p", run.sampler.top_p, "nucleus sampling in (0, 1]; 1 = off")->capture_default_str()->group(g);
  app.add_option("--min-p", run.sampler.min_p, "drop tokens below min-p x the best; 0 = off")
      ->capture_default_str()
      ->group(g);
  app.add_option("--seed", run.sampler.seed, "sampling seed (default: random, reported in --json)")
      ->check(kSeed)
      ->group(g);
}

// How the ranks hold and run the model; returns --ctx.
CLI::Option* add_model_options(CLI::App& app, RunOptions& run) {
  const std::string& g = run_group::model;
  CLI::Option* context =
      app.add_option("--ctx", run.context,
                     "positions a sequence may reach (default 4096; serve and chat: the model's context length, or "
                     "less if the KV cache of --parallel sequences of it would not fit in the ranks' memory)")
          ->check(kPositive)
          ->group(g);
  add_kv_type_option(app, run.kv_type,
                     "the KV cache's keys and values: " + kv_type_names() + " (default " +
                         kv_type_name(kDefaultKvType) + "; q8_0 takes 27% of f32's memory, q4_0 14%)")
      ->group(g);
  app.add_option("--batch", run.step_tokens, "prompt tokens per forward step")
      ->check(kPositive)
      ->capture_default_str()
      ->group(g);
  app.add_flag("--yarn-truncate", run.yarn_truncate,
               "round the YaRN correction range to whole dimensions as llama.cpp does (the "
               "default follows the OpenAI reference)")
      ->group(g);
  add_split_option(app, run.split,
                   std::string("how ranks share the model: tensor (a slice of every expert, head group and "
                               "vocabulary rows), experts (whole experts), layers (a pipeline of layer "
                               "ranges), auto (") +
                       split_mode_name(kAutoSplit) +
                       ", measured fastest for one and for several sequences; the default)")
      ->group(g);
  app.add_option("--exchange", run.exchange,
                 "how ranks sum activations: shm (MPI-3 shared-memory window; ranks on one "
                 "host), mpi (MPI_Allgather; any transport), auto (shm on one host)")
      ->check(CLI::IsMember({"auto", "shm", "mpi"}))
      ->capture_default_str()
      ->group(g);
  app.add_flag("--keep-page-cache", run.keep_page_cache,
               "leave the model file in the page cache after the ranks have copied it (faster "
               "reloads, e.g. for benchmarks, at the cost of a second copy in memory)")
      ->group(g);
  add_quantize_option(app, run.quantize,
                      "convert weights as each rank loads them: int8 (every role to q8_0), int4 (attention and "
                      "experts to 4 bits, embeddings and output head to q8_0), or ROLE=TYPE,... with roles attn, "
                      "experts, embed, output, all and types " +
                          quantize_type_names() +
                          "; from F32/F16/BF16 weights, or Q8_0 to fewer bits (a preset keeps what is already lower)")
      ->group(g);
  return context;
}

}  // namespace

void parse_kv_size(const std::string& text, int& positions, uint64_t& bytes) {
  positions = 0, bytes = 0;
  if (text.empty()) return;
  const std::optional<SizeText> size = parse_size(text, "--kv-size");
  if (!size) throw InputError(cat("--kv-size '", text, "': expected positions (16384) or bytes per rank (2G, 512M)"));
  if (size->has_unit) {
    bytes = size->value;
  } else {
    if (size->value > (1ull << 30)) throw InputError(cat("--kv-size ", text, ": more positions than a pool can hold"));
    positions = static_cast<int>(size->value);
  }
}

uint64_t parse_cache_ram(const std::string& text) {
  if (text.empty() || text == "0") return 0;
  const std::optional<SizeText> size = parse_size(text, "--cache-ram");
  if (!size) throw InputError(cat("--cache-ram '", text, "': expected MiB (1024), bytes per rank (2G, 512M) or 0"));
  if (!size->has_unit && size->value > (~0ull >> 20))
    throw InputError(cat("--cache-ram ", text, ": more than 2^64 - 1 bytes"));
  return size->has_unit ? size->value : size->value << 20;
}

void parse_speculate(const std::string& text, GeneratorOptions& g) {
  g.draft_by_cost = text == "auto";
  if (text == "off") return void(g.draft_tokens = 0);
  if (text == "auto") return void(g.draft_tokens = kAutoDraftTokens);
  const std::optional<SizeText> most = parse_size(text, "--speculate");
  if (most && !most->has_unit && most->value <= Drafter::kLongest) return void(g.draft_tokens = int(most->value));
  throw InputError(cat("--speculate '", text, "': expected off, auto or the most drafted tokens a step checks, 1..",
                       Drafter::kLongest));
}

CLI::Option* add_quantize_option(CLI::App& app, QuantizePlan& plan, const std::string& help) {
  auto parse = [&plan](const std::string& text) {
    try {
      plan = parse_quantize(text);
    } catch (const InputError& e) {  // CLI11 names the flag: the message's own "--quantize " goes
      const std::string message = e.what(), flag = "--quantize ";
      throw CLI::ValidationError("--quantize", message.starts_with(flag) ? message.substr(flag.size()) : message);
    }
  };
  return app.add_option_function<std::string>("--quantize", parse, help)->type_name("SPEC");
}

// CLI11 reads an enum as its number: a transform turns the name into it.
CLI::Option* add_kv_type_option(CLI::App& app, KvType& type, const std::string& help) {
  auto name = [](std::string& text) -> std::string {
    const std::optional<KvType> t = parse_kv_type(text);
    if (!t) return "'" + text + "': expected " + kv_type_names();
    text = std::to_string(static_cast<int>(*t));
    return "";
  };
  return app.add_option("--kv-type", type, help)->transform(CLI::Validator(name, "TYPE"));
}

CLI::Option* add_split_option(CLI::App& app, SplitMode& mode, const std::string& help) {
  auto name = [](std::string& text) -> std::string {
    const std::optional<SplitMode> m = text == "auto" ? kAutoSplit : find_split_mode(text);
    if (!m) return "'" + text + "': expected auto, " + split_mode_names();
    text = std::to_string(static_cast<int>(*m));
    return "";
  };
  return app.add_option("--split", mode, help)->transform(CLI::Validator(name, "MODE"));
}

GeneratorOptions generator_options(const RunOptions& o) {
  GeneratorOptions g;
  g.max_sequences = o.parallel;
  g.step_tokens = o.step_tokens;
  g.context = o.context;
  parse_kv_size(o.kv_size, g.kv_positions, g.kv_bytes);
  g.kv_type = o.kv_type;
  g.prefix_reuse = !o.no_prefix_cache;
  parse_speculate(o.speculate, g);
  g.cache_ram_bytes = parse_cache_ram(o.cache_ram);
  if (g.cache_ram_bytes > 0 && !g.prefix_reuse)
    throw InputError(cat("--cache-ram ", o.cache_ram, " does nothing with --no-prefix-cache (it keeps prefixes)"));
  if (!o.cache_dir.empty() && !g.prefix_reuse)
    throw InputError(cat("--cache-dir ", o.cache_dir, " does nothing with --no-prefix-cache (it keeps prefixes)"));
  if (!o.cache_dir.empty() && g.cache_ram_bytes == 0)
    throw InputError(cat("--cache-dir ", o.cache_dir, " with --cache-ram ", o.cache_ram.empty() ? "unset" : o.cache_ram,
                         ": the disk tier keeps what enters the RAM tier and loads it back into it at start, so it "
                         "needs one (leave --cache-ram out for its default)"));
  g.cache_dir = o.cache_dir;
  g.yarn_truncate = o.yarn_truncate;
  return g;
}

RunFlags add_run_options(CLI::App& app, RunOptions& run) {
  RunFlags f;
  f.model =
      app.add_option("-m,--model", run.model, "GGUF model file (default: the small synthetic model scripts/demo makes)")
          ->capture_default_str()
          ->group(run_group::model);
  f.prompt = app.add_option("-p,--prompt", run.prompt, "the prompt (control tokens like <|start|> are parsed)")
                 ->group(run_group::prompt);
  f.prompt_file = app.add_option("-f,--file", run.prompt_file,
                                 "the prompt: the whole file, byte for byte (-: standard input); for a prompt "
                                 "longer than the 128 KiB one argument may have")
                      ->type_name("FILE")
                      ->excludes(f.prompt)
                      ->group(run_group::prompt);
  f.prompts_file = app.add_option("--prompts-file", run.prompts_file,
                                  "prompts, one per line: each line is a sequence, arriving in order, "
                                  "--parallel of them running at once")
                       ->excludes(f.prompt)
                       ->excludes(f.prompt_file)
                       ->group(run_group::prompt);
  app.add_flag("--chat", run.chat, "wrap the prompt in the harmony chat format and print only the final channel")
      ->group(run_group::prompt);
  f.parallel = app.add_option("--parallel", run.parallel,
                              "sequences running at once, every step carrying each one's next token (continuous "
                              "batching); without --prompts-file, this many sequences of -p or -f (sequence i samples "
                              "with seed + i); their texts are printed at the end")
                   ->check(kPositive)
                   ->capture_default_str()
                   ->group(run_group::sequences);
  app.add_option("--kv-size", run.kv_size,
                 "the KV cache pool of each rank: positions (e.g. 65536) or bytes (e.g. 4G, 512M); "
                 "default: --ctx x --parallel positions")
      ->group(run_group::sequences);
  app.add_option("--speculate", run.speculate,
                 "speculative decoding: each decoding sequence's next token comes with the tokens that followed "
                 "its last words where they occurred before in its text (prompt lookup), checked in the same step "
                 "and kept where they are what the model chooses -- the same tokens as off, fewer steps where text "
                 "repeats; auto: up to " +
                     std::to_string(kAutoDraftTokens) +
                     " drafted tokens a step where the measured cost of a step says they pay; N: every proposal, up "
                     "to N tokens; off: none")
      ->type_name("off|auto|N")
      ->capture_default_str()
      ->group(run_group::speculation);
  app.add_flag("--no-prefix-cache", run.no_prefix_cache,
               "never reuse the keys and values of a prompt prefix computed before")
      ->group(run_group::prefix_cache);
  app.add_option("--cache-ram", run.cache_ram,
                 "a RAM tier of the prefix cache on each rank, in MiB (or 512M, 2G): blocks the KV pool reuses "
                 "are kept there and copied back when their prefix returns. Default: none, since on a CPU server "
                 "the memory is the model's and the KV pool's unless you give some; with --cache-dir, a quarter of "
                 "what the rank's memory leaves after the rest of the run, at most " +
                     format_bytes(kDefaultCacheRam))
      ->type_name("MIB")
      ->group(run_group::prefix_cache);
  app.add_option("--cache-dir", run.cache_dir,
                 "a disk tier under the RAM tier (--cache-ram): blocks entering the RAM tier are also "
                 "written to files here, up to --cache-ram's bytes per rank, and loaded back into it at the next "
                 "start, so a restart recomputes nothing of a saved prefix")
      ->type_name("DIR")
      ->group(run_group::prefix_cache);
  add_sampling_options(app, run);
  f.seed = app.get_option("--seed");
  f.context = add_model_options(app, run);
  app.add_flag("--show-analysis", run.show_analysis, "with --chat, print the analysis channel too")
      ->group(run_group::chat_format);
  app.add_option("--reasoning", run.reasoning, "with --chat: low, medium or high")
      ->check(CLI::IsMember({"low", "medium", "high"}))
      ->capture_default_str()
      ->group(run_group::chat_format);
  app.add_flag("--json", run.json, "print one JSON object (text, ids, timings) instead of text")
      ->group(run_group::output);
  app.add_option("--top-logprobs", run.top_logprobs,
                 "report each generated token's log-probability and the K most likely")
      ->check(CLI::Range(0, kMaxTopLogprobs))
      ->group(run_group::logprobs);
  return f;
}

void refuse_other_groups(const CLI::App& app, const std::vector<std::string>& allowed, const std::string& where) {
  const std::vector<std::string> groups = {run_group::model,        run_group::sequences, run_group::prefix_cache,
                                           run_group::speculation,  run_group::sampling,  run_group::prompt,
                                           run_group::chat_format,  run_group::output,    run_group::logprobs,
                                           run_group::output_format};
  for (const CLI::Option* option : app.get_options()) {
    const std::string& group = option->get_group();
    if (option->count() == 0 || std::find(groups.begin(), groups.end(), group) == groups.end() ||
        std::find(allowed.begin(), allowed.end(), group) != allowed.end())
      continue;
    throw CLI::ValidationError(option->get_name() + " does nothing " + where);
  }
}

}  // namespace tps
