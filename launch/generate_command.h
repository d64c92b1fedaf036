// `tpsrun` generation: prompt in, tokens out (streamed as UTF-8-safe text),
// with the timing users compare engines by. Every rank runs it together on
// its shard of the model; rank 0 prints.
#pragma once

#include <string>
#include <vector>

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

// Collective: every rank calls them with the same options.
int run_generate(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
