// tpsrun: the tps runner, started once per rank by `mpirun -np N tpsrun ...`
// (or directly, as one rank). Every rank binds itself to its place in the
// plan before doing anything else.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "launch/chat_command.h"
#include "launch/cli.h"
#include "launch/generate_command.h"
#include "launch/perplexity_command.h"
#include "launch/rank_run.h"
#include "launch/rank_setup.h"
#include "launch/score_command.h"
#include "launch/serve_command.h"
#include "launch/sweep_command.h"
#include "launch/tokenize_command.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mpi_session.h"
#include "topology/machine.h"

namespace {

struct Options {
  int threads = 0;
  bool quiet = false;
  bool verbose = false;
};

// The embedded default: the small synthetic model scripts/demo makes.
const char* kDefaultModel = "models/gpt-oss-small.gguf";

// What --version adds for tpsrun: the kernel set this CPU gets, and the MPI
// and hwloc libraries it runs with.
std::string runtime_versions() {
  std::string kernels;
  try {
    kernels = tps::isa_name(tps::best_kernel_set().isa);
  } catch (const tps::Error& e) {
    kernels = e.what();
  }
  std::string runs;
  for (tps::Isa isa : tps::supported_isas()) runs += std::string(runs.empty() ? "" : ", ") + tps::isa_name(isa);
  return "kernels: " + kernels + " (this CPU runs " + runs + ")\nMPI: " + tps::mpi_library_version() +
         "\nhwloc: " + tps::hwloc_version();
}

}  // namespace

int main(int argc, char** argv) {
  // Output to a reader gone is an error said in one line (standard output:
  // Broken pipe), not a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  Options o;
  tps::RunOptions run;
  run.model = kDefaultModel;
  CLI::App app{
      "tpsrun: run gpt-oss models on CPUs, one MPI rank per NUMA node.\n"
      "Start it as `mpirun -np N tpsrun ...`: each rank places and binds itself. "
      "Without a subcommand it generates text from -p PROMPT.",
      "tpsrun"};
  app.add_option("-t,--threads", o.threads,
                 "worker threads per rank (default: one per core "
                 "of the rank's share of its NUMA node)")
      ->check(tps::kPositive);
  app.add_flag("-q,--quiet", o.quiet, "print only errors to stderr");
  app.add_flag("-v,--verbose", o.verbose, "print debugging detail to stderr");
  auto* model = app.add_option("-m,--model", run.model,
                               "GGUF model file (default: the small "
                               "synthetic model scripts/demo makes)")
                    ->capture_default_str();
  auto* prompt = app.add_option("-p,--prompt", run.prompt, "the prompt (control tokens like <|start|> are parsed)");
  auto* prompts = app.add_option("--prompts-file", run.prompts_file,
                                 "prompts, one per line: each line is a sequence, arriving in order, "
                                 "--parallel of them running at once")
                      ->excludes(prompt);
  auto* parallel = app.add_option("--parallel", run.parallel,
                                  "sequences running at once, every step carrying each one's next token (continuous "
                                  "batching); without --prompts-file, this many sequences of -p (sequence i samples "
                                  "with seed + i); their texts are printed at the end")
                       ->check(tps::kPositive)
                       ->capture_default_str();
  app.add_option("--kv-size", run.kv_size,
                 "the KV cache pool of each rank: positions (e.g. 65536) or bytes (e.g. 4G, 512M); "
                 "default: --ctx x --parallel positions");
  app.add_flag("--no-prefix-cache", run.no_prefix_cache,
               "never reuse the keys and values of a prompt prefix computed before");
  app.add_option("-n,--max-tokens", run.max_tokens, "tokens to generate at most")->capture_default_str();
  app.add_option("--temp", run.sampler.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  app.add_option("--top-k", run.sampler.top_k, "keep the k most likely tokens; 0 = off")->capture_default_str();
  app.add_option("--top-p", run.sampler.top_p, "nucleus sampling in (0, 1]; 1 = off")->capture_default_str();
  app.add_option("--min-p", run.sampler.min_p, "drop tokens below min-p x the best; 0 = off")->capture_default_str();
  auto* seed = app.add_option("--seed", run.sampler.seed,
                              "sampling seed (default: random, "
                              "reported in --json)")
                   ->check(tps::kSeed);
  auto* ctx = app.add_option("--ctx", run.ctx, "context length in tokens (KV cache size)")
                  ->check(tps::kPositive)
                  ->capture_default_str();
  app.add_option("--kv-type", run.kv_type,
                 std::string("the KV cache's keys and values: f32, f16, bf16 or q8_0 (default ") +
                     tps::kv_type_name(tps::kDefaultKvType) + "; q8_0 takes 27% of f32's memory)")
      ->check(tps::kKvTypeName);
  app.add_option("--batch", run.batch, "prompt tokens per forward step")->check(tps::kPositive)->capture_default_str();
  app.add_flag("--chat", run.chat,
               "wrap the prompt in the harmony chat format and print only "
               "the final channel");
  app.add_flag("--show-analysis", run.show_analysis, "with --chat, print the analysis channel too");
  app.add_option("--reasoning", run.reasoning, "with --chat: low, medium or high")
      ->check(CLI::IsMember({"low", "medium", "high"}))
      ->capture_default_str();
  auto* schema = app.add_option("--json-schema", run.json_schema_file,
                                "hold the generated text to this JSON Schema's JSON (with --chat: the final "
                                "message, the analysis free under --reasoning's budget)")
                     ->check(CLI::ExistingFile);
  app.add_option("--grammar", run.grammar_file, "hold the generated text to this GBNF grammar (llama.cpp's notation)")
      ->check(CLI::ExistingFile)
      ->excludes(schema);
  app.add_flag("--json", run.json, "print one JSON object (text, ids, timings) instead of text");
  app.add_option("--top-logprobs", run.top_logprobs,
                 "report each generated token's log-probability and the K most likely")
      ->check(CLI::Range(0, tps::kMaxTopLogprobs));
  app.add_flag("--yarn-truncate", run.yarn_truncate,
               "round the YaRN correction range to whole dimensions as llama.cpp does (the "
               "default follows the OpenAI reference)");
  app.add_option("--split", run.split,
                 "how ranks share the model: tensor (a slice of every expert, head group and "
                 "vocabulary rows), experts (whole experts), layers (a pipeline of layer "
                 "ranges), auto (tensor, measured fastest for one and for several sequences)")
      ->check(CLI::IsMember({"auto", "tensor", "experts", "layers"}))
      ->capture_default_str();
  app.add_option("--exchange", run.exchange,
                 "how ranks sum activations: shm (MPI-3 shared-memory window; ranks on one "
                 "host), mpi (MPI_Allgather; any transport), auto (shm on one host)")
      ->check(CLI::IsMember({"auto", "shm", "mpi"}))
      ->capture_default_str();
  app.add_flag("--keep-page-cache", run.keep_page_cache,
               "leave the model file in the page cache after the ranks have copied it (faster "
               "reloads, e.g. for benchmarks, at the cost of a second copy in memory)");
  app.add_option("--quantize", run.quantize,
                 "convert weights as each rank loads them: int8 (every role to q8_0), int4 (attention and "
                 "experts to 4 bits, embeddings and output head to q8_0), or ROLE=TYPE,... with roles attn, "
                 "experts, embed, output, all and types q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_k..q6_k, "
                 "iq4_xs; from F32/F16/BF16 weights, or Q8_0 to fewer bits (a preset keeps what is already lower)")
      ->check(tps::kQuantizeSpec);
  app.require_subcommand(0, 1);

  CLI::App* place =
      app.add_subcommand("place", "bind each rank to its cores and NUMA node, print the placement, and exit");
  CLI::App* score = app.add_subcommand("score",
                                       "teacher forcing: the log-probability of each next token of a given sequence "
                                       "and the top alternatives (uses -m, --top-logprobs, --json)");
  score->add_option("--ids", run.ids_file, "file of token ids separated by white space")->required();
  score->fallthrough();
  tps::SweepOptions sweep_options;
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "speed against the KV cache's depth, as llama-sweep-bench: the cache filled in chunks of --batch tokens up "
      "to --ctx, --tg tokens decoded before each chunk (uses -m, --ctx, --batch, --kv-type, --split, --json)");
  sweep->add_option("--tg", sweep_options.tg, "tokens decoded at each depth")
      ->check(tps::kPositive)
      ->capture_default_str();
  sweep->fallthrough();

  tps::PerplexityOptions ppl;
  CLI::App* perplexity = app.add_subcommand(
      "perplexity",
      "how well the model predicts a text, as llama-perplexity measures it: windows of --ctx tokens "
      "(default 512), the second half of each scored; perplexity with its error, or with --kl-base the KL "
      "divergence, top-1 agreement and token-probability changes against a base model (uses -m, --ctx, "
      "--batch, --json; progress on stderr)");
  auto* ppl_text = perplexity->add_option("-f,--file", ppl.text_file, "the text");
  auto* ppl_chunks =
      perplexity->add_option("--chunks", ppl.chunks, "score this many windows at most")->check(tps::kPositive);
  auto* ppl_save = perplexity->add_option(
      "--save-logits", ppl.save_logits,
      "write each scored position's log-probabilities to this file, a base for --kl-base (llama-perplexity's "
      "--kl-divergence-base format: either engine reads the other's)");
  perplexity
      ->add_option("--kl-base", ppl.kl_base,
                   "compare with the log-probabilities saved in this file, on its text and windows")
      ->excludes(ppl_text)
      ->excludes(ppl_save)
      ->excludes(ppl_chunks);
  perplexity->fallthrough();

  tps::ServeOptions serve_options;
  CLI::App* serve = app.add_subcommand(
      "serve",
      "an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /v1/models, /health, "
      "/metrics, and a chat page at /): rank 0 listens, every rank runs every step; --parallel "
      "sequences at once (default 4); SIGTERM or Ctrl-C stops it once what runs is done");
  serve->add_option("--host", serve_options.host, "address to listen on")->capture_default_str();
  serve->add_option("--port", serve_options.port, "port to listen on (0: any free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve->add_option("--api-key", serve_options.api_key, "require \"Authorization: Bearer KEY\" on /v1/*");
  serve
      ->add_option("--max-queue", serve_options.max_queue,
                   "requests that may wait for a place; more are answered 503 with Retry-After")
      ->check(CLI::Range(1, tps::ServeOptions::kMaxQueue))
      ->capture_default_str();
  serve->add_option("--timeout", serve_options.request_seconds, "seconds a request may take, waiting included")
      ->check(tps::positive_seconds(tps::ServeOptions::kMaxRequestSeconds))
      ->capture_default_str();
  serve->add_option("--alias", run.alias, "the model's id in the API (default: the file's name)");
  serve->fallthrough();

  CLI::App* chat =
      app.add_subcommand("chat",
                         "an interactive chat in the terminal (harmony, multi-turn, streaming; Ctrl-C stops an answer; "
                         "/reset, /stats, /reasoning low|medium|high, /quit)");
  chat->fallthrough();

  tps::TokenizeOptions tk;
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "print the token ids (and pieces) of a text with the model's tokenizer");
  tokenize->add_option("-m,--model", tk.model, "GGUF model file")->required();
  auto* text = tokenize->add_option("--text", tk.text, "text to tokenize");
  tokenize->add_option("--file", tk.file, "file whose contents to tokenize")->excludes(text);
  tokenize->add_flag("--json", tk.json, "print {\"ids\": [...], \"pieces\": [...]}");
  tokenize->add_flag("--ids-only", tk.ids_only, "print only the ids, as a list");
  tokenize->add_flag("!--no-parse-special", tk.parse_special,
                     "treat <|start|> and other control-token text as plain text");
  // Options that do nothing in a mode are refused there, not ignored.
  const std::vector<std::pair<CLI::App*, std::vector<std::string>>> idle_options = {
      {place,
       {"--model",      "--prompt",       "--prompts-file",  "--parallel", "--kv-size",       "--no-prefix-cache",
        "--max-tokens", "--temp",         "--top-k",         "--top-p",    "--min-p",         "--seed",
        "--ctx",        "--kv-type",      "--batch",         "--chat",     "--show-analysis", "--reasoning",
        "--json",       "--top-logprobs", "--yarn-truncate", "--split",    "--exchange",      "--keep-page-cache",
        "--quantize",   "--json-schema",  "--grammar"}},
      {sweep,
       {"--prompt", "--prompts-file", "--parallel", "--kv-size", "--no-prefix-cache", "--max-tokens", "--temp",
        "--top-k", "--top-p", "--min-p", "--seed", "--chat", "--show-analysis", "--reasoning", "--top-logprobs",
        "--json-schema", "--grammar"}},
      {score,
       {"--prompt", "--prompts-file", "--parallel", "--kv-size", "--no-prefix-cache", "--max-tokens", "--temp",
        "--top-k", "--top-p", "--min-p", "--seed", "--chat", "--show-analysis", "--reasoning", "--json-schema",
        "--grammar"}},
      {serve,
       {"--prompt", "--prompts-file", "--max-tokens", "--temp", "--top-k", "--top-p", "--min-p", "--seed", "--chat",
        "--show-analysis", "--reasoning", "--json", "--top-logprobs", "--json-schema", "--grammar"}},
      {chat,
       {"--prompt", "--prompts-file", "--parallel", "--kv-size", "--json", "--top-logprobs", "--json-schema",
        "--grammar"}},
      {perplexity,
       {"--prompt", "--prompts-file", "--parallel", "--kv-size", "--no-prefix-cache", "--max-tokens", "--temp",
        "--top-k", "--top-p", "--min-p", "--seed", "--chat", "--show-analysis", "--reasoning", "--top-logprobs",
        "--json-schema", "--grammar"}},
      {nullptr, {"--show-analysis", "--reasoning"}},  // generation without --chat
  };
  // What the options say together, checked with the rest of the command line.
  app.callback([&] {
    if (tokenize->parsed()) return;
    const bool generating = !place->parsed() && !score->parsed() && !sweep->parsed() && !serve->parsed() &&
                            !chat->parsed() && !perplexity->parsed();
    for (const auto& [mode, names] : idle_options) {
      if (mode ? !mode->parsed() : !generating || run.chat) continue;
      for (const std::string& name : names)
        if (app.get_option(name)->count() > 0)
          throw CLI::ValidationError(name + " does nothing " +
                                     (mode ? "with `tpsrun " + mode->get_name() + "`" : std::string("without --chat")));
    }
    if (place->parsed()) return;
    if (perplexity->parsed() && ppl.kl_base.empty() && ppl_text->count() == 0)
      throw CLI::ValidationError("perplexity: give the text with -f FILE, or a base with --kl-base FILE");
    if (generating && prompt->count() == 0 && prompts->count() == 0)
      throw CLI::ValidationError("give a prompt with -p PROMPT, or a subcommand");
    if (model->count() == 0 && !std::filesystem::exists(run.model))
      throw CLI::ValidationError(run.model +
                                 ": no such file; make the default model with `build/bin/tps-mkmodel "
                                 "--preset small` (scripts/demo does) or give -m FILE");
  });
  tps::add_version_flag(app, runtime_versions);
  if (auto code = tps::parse_command_line(app, argc, argv)) return *code;
  run.seed_given = seed->count() > 0;
  run.ctx_given = ctx->count() > 0;
  if (serve->parsed() && parallel->count() == 0) run.parallel = 4;
  ppl.window_given = ctx->count() > 0;
  if (ppl.window_given) ppl.window = run.ctx;
  if (tokenize->parsed())  // a local utility: no ranks, no binding
    return tps::run_tool("tpsrun", [&] { return tps::run_tokenize(tk); });

  tps::log_configure("tpsrun", o.quiet ? tps::LogLevel::quiet : o.verbose ? tps::LogLevel::debug : tps::LogLevel::info);
  return tps::run_on_all_ranks(argc, argv, [&](tps::MpiSession& mpi) {
    tps::RankSetup setup = tps::setup_rank(mpi, o.threads);
    if (place->parsed()) return 0;
    if (score->parsed()) return tps::run_score(run, mpi, setup);
    if (sweep->parsed()) return tps::run_sweep(run, sweep_options, mpi, setup);
    if (perplexity->parsed()) return tps::run_perplexity(run, ppl, mpi, setup);
    if (serve->parsed()) return tps::run_serve(run, serve_options, mpi, setup);
    if (chat->parsed()) return tps::run_chat(run, mpi, setup);
    return tps::run_generate(run, mpi, setup);
  });
}
