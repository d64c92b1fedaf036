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
#include "launch/output_format.h"
#include "launch/perplexity_command.h"
#include "launch/rank_run.h"
#include "launch/rank_setup.h"
#include "launch/replay_command.h"
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

// What the options say together, checked with the rest of the command line:
// an option a mode does not use is refused there (with `tpsrun MODE`, or
// in generation without --chat), not ignored.
void check_together(const CLI::App& app, const tps::RunOptions& run, const tps::RunFlags& flags,
                    const std::vector<tps::RunMode>& modes) {
  for (const tps::RunMode& mode : modes)
    if (mode.command->parsed())
      return tps::refuse_other_groups(app, mode.groups, "with `tpsrun " + mode.command->get_name() + "`");
  if (!run.chat)
    tps::refuse_other_groups(app,
                             {tps::run_group::model, tps::run_group::sequences, tps::run_group::prefix_cache,
                              tps::run_group::speculation, tps::run_group::sampling, tps::run_group::prompt,
                              tps::run_group::output, tps::run_group::logprobs, tps::run_group::output_format},
                             "without --chat");
  if (flags.prompt->count() == 0 && flags.prompt_file->count() == 0 && flags.prompts_file->count() == 0)
    throw CLI::ValidationError("give a prompt with -p PROMPT or -f FILE, or a subcommand");
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
      "Without a subcommand it generates text from -p PROMPT (or -f FILE).",
      "tpsrun"};
  app.add_option("-t,--threads", o.threads,
                 "worker threads per rank (default: one per core "
                 "of the rank's share of its NUMA node)")
      ->check(tps::kPositive);
  app.add_flag("-q,--quiet", o.quiet, "print only errors to stderr");
  app.add_flag("-v,--verbose", o.verbose, "print debugging detail to stderr");
  const tps::RunFlags flags = tps::add_run_options(app, run);
  tps::add_output_format_options(app, run);
  app.require_subcommand(0, 1);

  tps::PerplexityOptions ppl;
  tps::ServeOptions serve_options;
  tps::TokenizeOptions tk;
  tps::SweepOptions sweep_options;
  tps::ReplayOptions replay_options;
  const tps::RunMode place{
      app.add_subcommand("place", "bind each rank to its cores and NUMA node, print the placement, and exit"), {}};
  const tps::RunMode score = tps::add_score_command(app, run), perplexity = tps::add_perplexity_command(app, ppl),
                     serve = tps::add_serve_command(app, serve_options, run), chat = tps::add_chat_command(app),
                     sweep = tps::add_sweep_command(app, sweep_options),
                     replay = tps::add_replay_command(app, replay_options);
  const std::vector<tps::RunMode> modes = {place, score, perplexity, serve, chat, sweep, replay};
  CLI::App* tokenize = tps::add_tokenize_command(app, tk);
  app.callback([&] {
    if (tokenize->parsed()) return;
    check_together(app, run, flags, modes);
    if (place.command->parsed()) return;
    if (flags.model->count() == 0 && !std::filesystem::exists(run.model))
      throw CLI::ValidationError(run.model +
                                 ": no such file; make the default model with `build/bin/tps-mkmodel "
                                 "--preset small` (scripts/demo does) or give -m FILE");
  });
  tps::add_version_flag(app, runtime_versions);
  if (auto code = tps::parse_command_line(app, argc, argv)) return *code;
  run.seed_given = flags.seed->count() > 0;
  run.context_given = flags.context->count() > 0;
  if (serve.command->parsed() && flags.parallel->count() == 0) run.parallel = 4;
  ppl.window_given = flags.context->count() > 0;
  if (ppl.window_given) ppl.window = run.context;
  if (tokenize->parsed())  // a local utility: no ranks, no binding
    return tps::run_tool("tpsrun", [&] { return tps::run_tokenize(tk); });

  tps::log_configure("tpsrun", o.quiet ? tps::LogLevel::quiet : o.verbose ? tps::LogLevel::debug : tps::LogLevel::info);
  return tps::run_on_all_ranks(argc, argv, [&](tps::MpiSession& mpi) {
    tps::RankSetup setup = tps::setup_rank(mpi, o.threads);
    if (place.command->parsed()) return 0;
    if (score.command->parsed()) return tps::run_score(run, mpi, setup);
    if (sweep.command->parsed()) return tps::run_sweep(run, sweep_options, mpi, setup);
    if (replay.command->parsed()) return tps::run_replay(run, replay_options, mpi, setup);
    if (perplexity.command->parsed()) return tps::run_perplexity(run, ppl, mpi, setup);
    if (serve.command->parsed()) return tps::run_serve(run, serve_options, mpi, setup);
    if (chat.command->parsed()) return tps::run_chat(run, mpi, setup);
    return tps::run_generate(run, mpi, setup);
  });
}
