// tpsrun sweep: speed against the KV cache's depth, as llama-sweep-bench
// measures it. One sequence fills the cache in chunks of --batch tokens up
// to --ctx; before each chunk it decodes --tg tokens at that depth. Each
// row: the depth (n_kv), the chunk's prefill tokens/s, the decode's
// tokens/s, the attention's share of the decode's time, and the KV bytes a
// decoded token reads on each rank. The tokens are a fixed pseudo-random
// sequence (varied, so that the experts chosen vary as in text; no
// sampling, so that every row measures the forward pass alone).
#pragma once

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

struct SweepOptions {
  int tg = 32;  // tokens decoded at each depth
};

// Registers `tpsrun sweep` and its --tg; the run options it uses.
RunMode add_sweep_command(CLI::App& app, SweepOptions& sweep);

// Collective: every rank calls it with the same options.
int run_sweep(const RunOptions& options, const SweepOptions& sweep, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
