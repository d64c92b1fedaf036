// `tpsrun serve`: the model behind an OpenAI-compatible HTTP server
// (serve/server.h). Rank 0 listens; every rank runs every step.
#pragma once

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"
#include "serve/server.h"

namespace tps {

// `tpsrun serve` and its options, into serve and run (--alias).
RunMode add_serve_command(CLI::App& app, ServeOptions& serve, RunOptions& run);

// Collective: every rank calls it with the same options. Returns when a
// stop signal (SIGTERM, SIGINT) has let every running request finish.
int run_serve(const RunOptions& options, const ServeOptions& serve, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
