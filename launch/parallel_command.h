// `tpsrun --parallel K`: K sequences at once, their texts at the end.
#pragma once

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

// Collective: every rank calls it with the same options.
int run_parallel(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
