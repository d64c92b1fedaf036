#include "launch/rank_memory.h"

#include <algorithm>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/sched/generator.h"
#include "engine/step/forward.h"
#include "engine/step/kv_pool.h"
#include "runtime/error.h"
#include "runtime/exchange.h"
#include "topology/binding.h"
#include "topology/machine.h"

namespace tps {

Shard planned_shard(const RunOptions& o, const MpiSession& mpi, const GgufFile& file) {
  return plan_shard(model_shape(file, read_model_config(file), o.quantize), o.split, mpi.rank(), mpi.size());
}

RankMemory check_rank_memory(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup, const GgufFile& file,
                             uint64_t command_bytes) {
  const ModelConfig c = read_model_config(file);
  check_context(c, o.context);
  const Shard shard = planned_shard(o, mpi, file);
  const GeneratorOptions g = generator_options(o);

  RankMemory m;
  m.weights = shard_bytes(file, c, shard, o.quantize);
  const SchedulerOptions s = scheduler_options(g, c, shard);
  m.kv = kv_pool_bytes(s, g.kv_type, c, shard);
  // The sliding-window layers' share: a window a sequence and what a step's
  // prompt chunks take (--batch), not --ctx.
  const uint64_t sliding_kv = KvPool::block_bytes(c, shard, g.kv_type, true) * static_cast<uint64_t>(s.sliding_blocks);
  m.cache = g.prefix_reuse ? g.cache_ram_bytes : 0;
  m.buffers = generator_bytes(g, c, shard) - m.kv - m.cache;
  m.exchange = mpi.size() > 1 ? Exchange::window_bytes(static_cast<size_t>(o.step_tokens) * c.n_embd) : 0;
  m.command = command_bytes;
  // The ranks this host placed on the same node share it.
  const PlacementPlan& plan = setup.plan;
  const int node = plan.ranks.at(mpi.local_rank()).numa_node;
  const auto sharing = std::count_if(plan.ranks.begin(), plan.ranks.end(),
                                     [node](const RankPlacement& r) { return r.numa_node == node; });
  const int node_os = setup.machine.numa_nodes.at(node).os_index;
  const uint64_t available = node_available_bytes(node_os);
  if (available == 0) return m;  // unknown: the allocations will say
  m.available = available / std::max<int64_t>(sharing, 1);
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
  throw InputError(
      cat("this run needs ", format_bytes(m.total()), " on rank ", mpi.rank(), " (weights ", format_bytes(m.weights),
          ", KV cache ", format_bytes(m.kv), ", step buffers ", format_bytes(m.buffers), ", exchange ",
          format_bytes(m.exchange), m.cache ? cat(", prompt cache (--cache-ram) ", format_bytes(m.cache)) : "",
          m.command ? cat(", the command's own ", format_bytes(m.command)) : "", ") but NUMA node ", node_os, " has ",
          format_bytes(available), " available", sharing > 1 ? cat(" for ", sharing, " ranks") : "", ": ", change));
}

}  // namespace tps
