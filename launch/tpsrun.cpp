// tpsrun: the tps runner, started once per rank by `mpirun -np N tpsrun ...`
// (or directly, as one rank). Every rank binds itself to its place in the
// plan before doing anything else.
#include <cstdio>

#include "launch/cli.h"
#include "launch/rank_setup.h"
#include "launch/tokenize_command.h"
#include "runtime/log.h"
#include "runtime/mpi_session.h"

namespace {

struct Options {
  int threads = 0;
  bool quiet = false;
  bool verbose = false;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"tpsrun: run gpt-oss models on CPUs, one MPI rank per NUMA node.\n"
               "Start it as `mpirun -np N tpsrun SUBCOMMAND ...`: each rank places and binds "
               "itself (one rank per socket/NUMA node).",
               "tpsrun"};
  app.add_option("-t,--threads", o.threads, "worker threads per rank (default: one per core "
                                            "of the rank's NUMA node share)")
      ->check(tps::kPositive);
  app.add_flag("-q,--quiet", o.quiet, "print only errors to stderr");
  app.add_flag("-v,--verbose", o.verbose, "print debugging detail to stderr");
  app.require_subcommand(1);
  CLI::App* place = app.add_subcommand(
      "place", "bind each rank to its cores and NUMA node, print the placement, and exit "
               "(a smoke test of the launch: the engine is not built yet)");
  tps::TokenizeOptions tk;
  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "print the token ids (and pieces) of a text with the model's tokenizer");
  tokenize->add_option("-m,--model", tk.model, "GGUF model file")->required();
  auto* text = tokenize->add_option("--text", tk.text, "text to tokenize");
  tokenize->add_option("--file", tk.file, "file whose contents to tokenize")->excludes(text);
  tokenize->add_flag("--json", tk.json, "print {\"ids\": [...], \"pieces\": [...]}");
  tokenize->add_flag("--ids", tk.ids_only, "print only the ids, as a list");
  tokenize->add_flag("!--no-parse-special", tk.parse_special,
                     "treat <|start|> and other control-token text as plain text");
  if (auto code = tps::parse_command_line(app, argc, argv)) return *code;
  if (tokenize->parsed()) {
    // A local utility: no ranks, no binding.
    return tps::run_tool("tpsrun", [&] { return tps::run_tokenize(tk); });
  }

  tps::log_configure(o.quiet     ? tps::LogLevel::quiet
                     : o.verbose ? tps::LogLevel::debug
                                 : tps::LogLevel::info,
                     0, 1);
  return tps::run_on_all_ranks(argc, argv, [&](tps::MpiSession& mpi) {
    tps::RankSetup setup = tps::setup_rank(mpi, o.threads);
    if (place->parsed()) return 0;
    return 0;
  });
}
