// What a tpsrun rank holds for a run -- its pinned threads, its shard of the
// model in its own memory, the exchange with the other ranks -- and how the
// ranks decide the next token together.
#pragma once

#include <span>

#include "engine/model/model.h"
#include "engine/sched/generator.h"
#include "engine/step/session.h"
#include "launch/rank_memory.h"
#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/clock.h"
#include "runtime/exchange.h"
#include "runtime/mpi_session.h"
#include "runtime/thread_pool.h"

namespace tps {

struct RankRun {
  RankMemory memory;  // checked before anything else is allocated
  ThreadPool pool;
  Model model;
  Exchange exchange;
  double load_seconds = 0;         // since t0: binding, loading, the exchange's set-up
  bool cache_ram_default = false;  // the RAM tier is --cache-dir's default (default_cache_ram)
  int numa_node = -1;              // OS index of the rank's node
  double on_node = -1;             // fraction of its weight pages there, from the kernel

  // Collective: loads every rank's shard, then prints one line per rank
  // (rank 0, in rank order): what it owns, its bytes, where its pages are.
  RankRun(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup, Clock::time_point t0);
  // The same with the model file open_model opened (for a command that reads
  // its header first), the command holding command_bytes besides (checked
  // with the rest).
  RankRun(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup, Clock::time_point t0, GgufFile file,
          uint64_t command_bytes = 0);

  const Shard& shard() const { return model.shard; }
  bool pipeline() const { return shard().mode == SplitMode::layers; }
  int last_rank() const { return shard().ranks - 1; }
  SessionOptions session_options(const RunOptions& options, int context) const;
  // Rank 0: one line on gen's KV pool -- its type, the bytes a position
  // takes, its positions and blocks, its size on each rank.
  void log_kv_pool(const Generator& gen) const;
};

// Opens the model file of the options on every rank, and checks that the
// ranks on each host opened the same file (one replaced while they started
// would give them different models). Collective.
GgufFile open_model(const RunOptions& options, const MpiSession& mpi);

}  // namespace tps
