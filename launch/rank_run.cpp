#include "launch/rank_run.h"

#include <fmt/format.h>

#include <cstdio>
#include <utility>

#include "launch/progress_line.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "topology/binding.h"

namespace tps {

namespace {

ThreadPool make_pool(int threads, const std::vector<int>& pus) {
  if (!pus.empty()) bind_this_thread({pus[0]});
  return ThreadPool(threads, [&pus](int t) {
    if (!pus.empty()) bind_this_thread({pus[t % pus.size()]});
  });
}

Model load(const RunOptions& o, const MpiSession& mpi, ThreadPool& pool, GgufFile file) {
  // Rank 0 shows its own progress on models of a GB or more; the others
  // load alongside.
  ProgressLine progress(cat("loading ", o.model));
  return load_model(std::move(file), pool, o.split, mpi.rank(), mpi.size(), o.quantize,
                    [&](uint64_t done, uint64_t total) {
                      if (mpi.rank() == 0 && total >= (1ull << 30)) progress.update(done, total);
                    });
}

}  // namespace

// Once this collective returns, every rank on the host has opened the file,
// so what each found in the page cache is what the host had before tps read
// any of it.
GgufFile open_model(const RunOptions& o, const MpiSession& mpi) {
  GgufFile file = GgufFile::open(o.model);
  std::string identity;
  for (int p = 0; p < file.parts(); ++p) identity += file.part(p).mapping().identity() + ";";
  if (!mpi.same_on_host(identity))
    throw InputError(cat(o.model, ": the ranks on one host opened different files (it was replaced while they ",
                         "started); start again"));
  return file;
}

RankRun::RankRun(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup, Clock::time_point t0)
    : RankRun(o, mpi, setup, t0, open_model(o, mpi)) {}

RankRun::RankRun(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup, Clock::time_point t0,
                 GgufFile file, uint64_t command_bytes)
    : memory(check_rank_memory(o, mpi, setup, file, command_bytes)),
      pool(make_pool(setup.binding.threads, setup.thread_pus)),
      model(load(o, mpi, pool, std::move(file))),
      exchange(mpi, o.exchange, static_cast<size_t>(o.step_tokens) * model.config.n_embd),
      load_seconds(seconds_since(t0)),
      cache_ram_default(o.cache_ram_default),
      numa_node(setup.machine.numa_nodes.at(setup.binding.numa_node).os_index) {
  // Once every rank on the host has its copy, the file's pages can go.
  exchange.barrier();
  const bool embeddings_from_file = model.weights.views.embd.data == model.file.tensor("token_embd.weight").data;
  if (mpi.local_rank() == 0 && !o.keep_page_cache) drop_file_cache(model.file, embeddings_from_file);

  const Shard& s = shard();
  const PageBuffer& mem = model.weights.memory;
  on_node = fraction_on_node(mem.data(), mem.size(), numa_node);
  std::string line = cat(
      "rank ", s.rank, "/", s.ranks, ": ", split_mode_name(s.mode), " split: ", share_text(s.share, s.mode), "; ",
      cat(static_cast<int>(mem.size() / 1e6)), " MB of weights in its own memory (",
      cat(static_cast<int>(decode_bytes_per_token(model.weights.views, model.config, s) / 1e6)), " MB read a token), ",
      on_node < 0 ? std::string("page placement unknown")
                  : cat(fmt::format("{:.1f}", on_node * 100), "% of sampled pages on NUMA node ", numa_node),
      "; ready in ", fmt::format("{:.1f}", load_seconds), " s");
  std::vector<std::string> idle = idle_parts(s.share, s.mode);
  if (!idle.empty()) {
    line += "; warning: holds no ";
    for (size_t i = 0; i < idle.size(); ++i) line += (i ? ", " : "") + idle[i];
    line += cat(" (", s.ranks, " ranks are more than this model has of them)");
  }
  std::vector<std::string> lines = mpi.gather_to_root(line);
  if (mpi.rank() == 0) {
    const ModelConfig& c = model.config;
    log_info("model ", model.file.path(), ": ", c.n_layer, " layers, ", c.n_expert, " experts (top-", c.n_expert_used,
             "), d=", c.n_embd, "; kernels ", isa_name(best_kernel_set().isa), "; exchange ",
             transport_name(exchange.transport()));
    if (!o.quantize.empty()) log_info("--quantize ", o.quantize.spec, ": ", o.quantize.describe(model.file));
    for (const std::string& l : lines) log_info(l);
  }
}

void RankRun::log_kv_pool(const Generator& gen) const {
  if (model.shard.rank != 0) return;
  const SchedulerOptions& so = gen.scheduler().options();
  const KvPool& kv = gen.kv();
  const uint64_t position = KvPool::block_bytes(model.config, model.shard, kv.type(), BlockKind::full) / kKvBlock;
  log_info("KV pool: ", kv_type_name(kv.type()), ", ", format_bytes(position), " a position in full-attention layers; ",
           so.full_blocks * kKvBlock, " positions (", so.full_blocks, " blocks of ", kKvBlock, ") and ",
           so.sliding_blocks, " sliding-window blocks, ", static_cast<int64_t>(kv.bytes() / 1e6),
           " MB on each rank; up to ", so.max_sequences, " sequence(s) at once, ", so.step_tokens, " tokens a step");
  if (so.tier_full_slots > 0) {
    const uint64_t tier =
        KvPool::block_bytes(model.config, model.shard, kv.type(), BlockKind::full) * so.tier_full_slots +
        KvPool::block_bytes(model.config, model.shard, kv.type(), BlockKind::sliding) * so.tier_sliding_slots;
    log_info("prompt cache RAM tier (",
             cache_ram_default ? cat("for --cache-dir, a quarter of what the rank's memory leaves, at most ",
                                     format_bytes(kDefaultCacheRam))
                               : std::string("--cache-ram"),
             "): ", so.tier_full_slots, " full-attention blocks (", so.tier_full_slots * kKvBlock, " positions) and ",
             so.tier_sliding_slots, " sliding-window blocks, ", static_cast<int64_t>(tier / 1e6),
             " MB at most on rank 0, allocated as blocks arrive");
  }
  if (gen.disk().on()) {
    const DiskTier::Stats& d = gen.disk().stats();
    log_info("prompt cache disk tier (--cache-dir ", gen.disk().dir(), "): ", d.files, " files (",
             static_cast<int64_t>(d.bytes / 1e6), " MB) of rank 0's, ", d.loaded, " blocks loaded into the RAM tier (",
             static_cast<int64_t>(d.load_seconds * 1000),
             " ms); written behind as blocks enter it, within the RAM tier's bytes");
  }
}

SessionOptions RankRun::session_options(const RunOptions& o, int context) const {
  SessionOptions so;
  so.context = context;
  so.step_tokens = o.step_tokens;
  so.kv_type = o.kv_type;
  so.yarn_truncate = o.yarn_truncate;
  return so;
}

}  // namespace tps
