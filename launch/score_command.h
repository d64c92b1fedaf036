// `tpsrun score`: teacher forcing. The log-probability of each next token
// of a given sequence of ids and the most likely alternatives, computed by
// every rank together on its shard; rank 0 prints.
#pragma once

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

// `tpsrun score` and its options, into run.
RunMode add_score_command(CLI::App& app, RunOptions& run);

// Collective: every rank calls it with the same options.
int run_score(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
