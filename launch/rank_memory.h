// What a tpsrun rank will allocate for a run -- its shard of the weights,
// the generator's KV pool, buffers and logits, its part of the exchange
// window -- computed from the model file's header and the options before
// anything is allocated, and checked against what its NUMA node has
// available (shared with the other ranks placed on that node). A flag that
// asks for too much is then one line naming it, not an OOM kill minutes into
// a load.
#pragma once

#include <cstdint>
#include <string>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/weights.h"
#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

struct RankMemory {
  uint64_t weights = 0, kv = 0, buffers = 0, exchange = 0;
  uint64_t cache = 0;      // the prompt cache's RAM tier at its cap (--cache-ram)
  uint64_t command = 0;    // what the command itself holds besides (perplexity's rows of logits)
  uint64_t available = 0;  // the rank's part of its node's available memory
  uint64_t total() const { return weights + kv + buffers + exchange + cache + command; }
};

// The shard this rank will hold, as check_rank_memory plans it from the
// options and the opened file's header: what a command keeps per
// vocabulary row of its own is counted from it.
Shard planned_shard(const RunOptions& options, const MpiSession& mpi, const GgufFile& file);

// The context `serve` and `chat` take without --ctx: the model's trained
// context, or less when the KV pool of --parallel sequences of it would not
// fit in 90% of what the rank's share of its node leaves after the rest
// (the least over the ranks), in whole KV blocks. With --kv-size, at most
// the positions of that pool. Collective.
int default_context(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup, const GgufFile& file);

// The RAM tier a --cache-dir without --cache-ram gets: a quarter of what
// the rank's share of its node leaves after the rest of the run, at most
// kDefaultCacheRam (run_options.h), in MiB (the least over the ranks);
// kDefaultCacheRam where the node's memory is unknown. Throws InputError
// naming --cache-dir when that holds no block. Collective.
std::string default_cache_ram(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup,
                              const GgufFile& file);
// Sets options.cache_ram to that for a --cache-dir without --cache-ram.
void resolve_cache_ram(RunOptions& options, const MpiSession& mpi, const RankSetup& setup, const GgufFile& file);

// From the opened model file's header. Also refuses --ctx beyond the model's
// context length. command_bytes: what the command allocates besides. Throws
// InputError naming the options to change when the rank's total is more
// than available.
RankMemory check_rank_memory(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup,
                             const GgufFile& file, uint64_t command_bytes = 0);

}  // namespace tps
