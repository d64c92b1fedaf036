#include "launch/rank_memory.h"

#include <algorithm>

#include "engine/cache/kv_pool.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/sched/generator.h"
#include "engine/step/forward.h"
#include "runtime/error.h"
#include "runtime/exchange.h"
#include "topology/binding.h"
#include "topology/machine.h"

namespace tps {

Shard planned_shard(const RunOptions& o, const MpiSession& mpi, const GgufFile& file) {
  return plan_shard(model_shape(file, read_model_config(file), o.quantize), o.split, mpi.rank(), mpi.size());
}

namespace {

// What the rank's weights, KV pool, buffers, exchange and caches take
// (available left 0).
RankMemory rank_needs(const RunOptions& o, const MpiSession& mpi, const GgufFile& file, const ModelConfig& c,
                      const Shard& shard, uint64_t command_bytes) {
  const GeneratorOptions g = generator_options(o);
  RankMemory m;
  m.weights = shard_bytes(file, c, shard, o.quantize);
  m.kv = kv_pool_bytes(scheduler_options(g, c, shard), g.kv_type, c, shard);
  m.cache = g.prefix_reuse ? g.cache_ram_bytes : 0;
  m.buffers = generator_bytes(g, c, shard) - m.kv - m.cache;
  m.exchange = mpi.size() > 1 ? Exchange::window_bytes(static_cast<size_t>(o.step_tokens) * c.n_embd) : 0;
  m.command = command_bytes;
  return m;
}

// The memory of the rank's NUMA node (0: unknown) and the ranks this host
// placed on it, which share it.
struct NodeShare {
  uint64_t available = 0;
  int64_t sharing = 1;
  int node_os = 0;
};
NodeShare node_share(const MpiSession& mpi, const RankSetup& setup) {
  const PlacementPlan& plan = setup.plan;
  const int node = plan.ranks.at(mpi.local_rank()).numa_node;
  NodeShare n;
  n.sharing = std::max<int64_t>(1, std::count_if(plan.ranks.begin(), plan.ranks.end(),
                                                 [node](const RankPlacement& r) { return r.numa_node == node; }));
  n.node_os = setup.machine.numa_nodes.at(node).os_index;
  n.available = node_available_bytes(n.node_os);
  return n;
}

}  // namespace

int default_context(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup, const GgufFile& file) {
  const ModelConfig c = read_model_config(file);
  const Shard shard = planned_shard(o, mpi, file);
  const int trained = static_cast<int>(std::min<uint32_t>(c.n_ctx_train, INT32_MAX / kKvBlock * kKvBlock));
  RunOptions at = o;
  at.context = trained;
  int64_t fits = trained;
  if (!o.kv_size.empty()) {  // the pool is as given: no more a sequence than it holds
    fits = std::min<int64_t>(fits, int64_t{scheduler_options(generator_options(at), c, shard).full_blocks} * kKvBlock);
  } else if (const NodeShare n = node_share(mpi, setup); n.available > 0) {
    // One block a sequence, then what 90% of the rest of the rank's share
    // holds (vLLM leaves 10% of a GPU the same way): the pool's pages are
    // touched as blocks fill, and the prefix cache fills them all in time.
    at.context = kKvBlock;
    const RankMemory least = rank_needs(at, mpi, file, c, shard, 0);
    const uint64_t share = n.available / n.sharing / 10 * 9;
    const uint64_t block = KvPool::block_bytes(c, shard, o.kv_type, BlockKind::full);
    const int64_t blocks = share > least.total() ? static_cast<int64_t>((share - least.total()) / block) : 0;
    const int64_t per_sequence = (blocks / o.parallel + 1) * kKvBlock;
    if (per_sequence >= int64_t{4} * kKvBlock) fits = std::min(fits, per_sequence);  // else: refused as asked
  }
  return static_cast<int>(mpi.min_over_ranks(fits));
}

std::string default_cache_ram(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup,
                              const GgufFile& file) {
  const ModelConfig c = read_model_config(file);
  const Shard shard = planned_shard(o, mpi, file);
  RunOptions without = o;
  without.cache_ram = "0", without.cache_dir.clear();
  const uint64_t rest = rank_needs(without, mpi, file, c, shard, 0).total();
  uint64_t bytes = kDefaultCacheRam;
  if (const NodeShare n = node_share(mpi, setup); n.available > 0) {
    const uint64_t share = n.available / n.sharing;
    bytes = std::min(bytes, share > rest ? (share - rest) / 4 : 0);
  }
  const int64_t mib = mpi.min_over_ranks(static_cast<int64_t>(bytes >> 20));
  if (static_cast<uint64_t>(mib) << 20 < tier_unit_bytes(o.kv_type, c, shard))
    throw InputError(cat("--cache-dir ", o.cache_dir, ": a quarter of what the rank's memory leaves after the run (",
                         mib, " MiB) holds no block of the RAM tier the disk tier loads into; give --cache-ram"));
  return std::to_string(mib);
}

void resolve_cache_ram(RunOptions& o, const MpiSession& mpi, const RankSetup& setup, const GgufFile& file) {
  if (o.cache_dir.empty() || !o.cache_ram.empty() || o.no_prefix_cache) return;
  o.cache_ram = default_cache_ram(o, mpi, setup, file);
  o.cache_ram_default = true;
}

RankMemory check_rank_memory(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup, const GgufFile& file,
                             uint64_t command_bytes) {
  const ModelConfig c = read_model_config(file);
  check_context(c, o.context);
  const Shard shard = planned_shard(o, mpi, file);
  const GeneratorOptions g = generator_options(o);
  RankMemory m = rank_needs(o, mpi, file, c, shard, command_bytes);
  // The sliding-window layers' share: a window a sequence and what a step's
  // prompt chunks take (--batch), not --ctx.
  const SchedulerOptions s = scheduler_options(g, c, shard);
  const uint64_t sliding_kv =
      KvPool::block_bytes(c, shard, g.kv_type, BlockKind::sliding) * static_cast<uint64_t>(s.sliding_blocks);
  const NodeShare n = node_share(mpi, setup);
  if (n.available == 0) return m;  // unknown: the allocations will say
  m.available = n.available / n.sharing;
  if (m.total() <= m.available) return m;

  // Name what to change after the part that asks the most.
  const uint64_t most = std::max({m.weights, m.kv, m.buffers, m.exchange, m.cache, m.command});
  const std::string change = most == m.weights ? "run more ranks on more NUMA nodes, or a smaller model"
                             : most == m.kv && sliding_kv > m.kv / 2
                                 ? cat("lower --batch (", o.step_tokens, ") or --parallel (", o.parallel, ")")
                             : most == m.kv ? (o.kv_size.empty() ? cat("lower --ctx (", o.context, ") or --parallel (",
                                                                       o.parallel, "), or give --kv-size")
                                                                 : cat("lower --kv-size (", o.kv_size, ")"))
                             : most == m.buffers ? cat("lower --ctx (", o.context, ") or --batch (", o.step_tokens, ")")
                             : most == m.cache   ? cat("lower --cache-ram (", o.cache_ram, ")")
                             : most == m.command ? std::string("run on more memory")
                                                 : cat("lower --batch (", o.step_tokens, ")");
  throw InputError(cat(
      "this run needs ", format_bytes(m.total()), " on rank ", mpi.rank(), " (weights ", format_bytes(m.weights),
      ", KV cache ", format_bytes(m.kv), ", step buffers ", format_bytes(m.buffers), ", exchange ",
      format_bytes(m.exchange), m.cache ? cat(", prompt cache (--cache-ram) ", format_bytes(m.cache)) : "",
      m.command ? cat(", the command's own ", format_bytes(m.command)) : "", ") but NUMA node ", n.node_os, " has ",
      format_bytes(n.available), " available", n.sharing > 1 ? cat(" for ", n.sharing, " ranks") : "", ": ", change));
}

}  // namespace tps
