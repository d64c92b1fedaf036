#include "launch/rank_run.h"

#include <cstdio>

#include "runtime/error.h"
#include "runtime/log.h"
#include "topology/binding.h"

namespace tps {

SplitMode choose_split(const RunOptions& o) {
  // Measured (docs/PERFORMANCE.md): tensor is the fastest split here for one
  // stream and for several -- each rank reads its share of every weight a
  // token uses, and the sums cost ~0.2% of a token; a balanced pipeline of
  // two sequences did not beat it on gpt-oss-20b.
  return o.split == "auto" ? SplitMode::tensor : parse_split_mode(o.split);
}

namespace {

std::string range_text(const Range& r) {
  return r.size() == 0 ? "none" : cat(r.begin, "-", r.end - 1);
}

// What a shard holds, in the words of its mode.
std::string shard_text(const Shard& s) {
  const RankShare& x = s.share;
  if (s.mode == SplitMode::layers)
    return cat("layers ", range_text(x.layers), x.vocab.size() ? ", output head" : "");
  std::string what = cat("KV heads ", range_text(x.kv_heads), ", ");
  what += s.mode == SplitMode::experts ? cat("experts ", range_text(x.experts))
                                       : cat("features ", range_text(x.ff), " of every expert");
  return what + cat(", vocabulary rows ", range_text(x.vocab));
}

ThreadPool make_pool(int threads, const std::vector<int>& pus) {
  if (!pus.empty()) bind_this_thread({pus[0]});
  return ThreadPool(threads, [&pus](int t) {
    if (!pus.empty()) bind_this_thread({pus[t % pus.size()]});
  });
}

Model load(const RunOptions& o, const MpiSession& mpi, ThreadPool& pool) {
  bool shown = false;
  int last_percent = -1;
  Model m = load_model(
      o.model, pool, choose_split(o), mpi.rank(), mpi.size(),
      [&](uint64_t done, uint64_t total) {
        // Rank 0 shows its own progress; the others load alongside.
        if (mpi.rank() != 0 || total < (1ull << 30) || log_level() < LogLevel::info) return;
        const int percent = static_cast<int>(100 * done / total);
        if (percent / 5 == last_percent / 5) return;
        last_percent = percent;
        std::fprintf(stderr, "\rtps: loading %s: %3d%% of %.1f GB", o.model.c_str(), percent,
                     total / 1e9);
        shown = true;
      });
  if (shown) std::fputc('\n', stderr);
  return m;
}

}  // namespace

RankRun::RankRun(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup,
                 Clock::time_point t0)
    : pool(make_pool(setup.binding.threads, setup.thread_pus)),
      model(load(o, mpi, pool)),
      exchange(mpi, o.exchange, static_cast<size_t>(o.batch) * model.config.n_embd),
      load_seconds(seconds_since(t0)),
      numa_node(setup.machine.numa_nodes.at(setup.binding.numa_node).os_index) {
  // Once every rank on the host has its copy, the file's pages can go.
  exchange.barrier();
  if (mpi.local_rank() == 0 && !o.keep_page_cache) drop_file_cache(model.file);

  const Shard& s = shard();
  const PageBuffer& mem = model.weights.memory;
  on_node = fraction_on_node(mem.data(), mem.size(), numa_node);
  std::string line = cat("rank ", s.rank, "/", s.ranks, ": ", split_mode_name(s.mode), " split: ",
                         shard_text(s), "; ", cat(static_cast<int>(mem.size() / 1e6)),
                         " MB of weights in its own memory, ",
                         on_node < 0 ? std::string("page placement unknown")
                                     : cat(static_cast<int>(on_node * 1000) / 10.0,
                                           "% of sampled pages on NUMA node ", numa_node),
                         "; ready in ", cat(static_cast<int>(load_seconds * 10) / 10.0), " s");
  std::vector<std::string> idle = idle_parts(s.share, s.mode);
  if (!idle.empty()) {
    line += "; warning: holds no ";
    for (size_t i = 0; i < idle.size(); ++i) line += (i ? ", " : "") + idle[i];
    line += cat(" (", s.ranks, " ranks are more than this model has of them)");
  }
  std::vector<std::string> lines = mpi.gather_to_root(line);
  if (mpi.rank() == 0) {
    const ModelConfig& c = model.config;
    log_info("tps: model ", model.file.path(), ": ", c.n_layer, " layers, ", c.n_expert,
             " experts (top-", c.n_expert_used, "), d=", c.n_embd, "; kernels ",
             isa_name(best_kernel_set().isa), "; exchange ", transport_name(exchange.transport()));
    for (const std::string& l : lines) log_info("tps: ", l);
  }
}

SessionOptions RankRun::session_options(const RunOptions& o, int ctx) const {
  SessionOptions so;
  so.n_ctx = ctx;
  so.max_batch = o.batch;
  so.yarn_truncate = o.yarn_truncate;
  return so;
}

SplitLogits split_logits(RankRun& r, std::span<const float> logits, Exchange& alone) {
  if (r.pipeline()) return SplitLogits{logits, 0, r.model.config.n_vocab, alone};
  return SplitLogits{logits, r.shard().share.vocab.begin, r.model.config.n_vocab, r.exchange};
}

Pick pick(RankRun& r, std::span<const float> logits, Sampler& sampler, int top_k) {
  Pick p;
  if (!r.pipeline() || r.shard().rank == r.last_rank()) {
    Exchange alone;
    const SplitLogits s = split_logits(r, logits, alone);
    p.id = sampler.sample(s);
    if (top_k > 0) {
      p.logprob = logprob_of(s, p.id);
      for (const TokenLogprob& t : top_logprobs(s, top_k)) p.top[p.n_top++] = t;
    }
  }
  if (r.pipeline()) r.exchange.broadcast(&p, sizeof p, r.last_rank());
  return p;
}

}  // namespace tps
