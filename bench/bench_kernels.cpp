// The matrix kernels as the forward pass runs them (matmul_rows over the
// rows of a weight matrix, handed to a pool's threads in chunks like
// run_products), for every instruction set this CPU runs x every
// weight format x shapes of gpt-oss-20b:
//   decode  (1 token):  q projection 4096x2880, expert 2880x2880, a slice of
//                       the output head 16384x2880 (the whole head is
//                       201088 rows; a slice keeps the weights at a few
//                       hundred MB while still far larger than any cache)
//   a step of 2-16 sequences' next tokens (continuous batching): the output
//                       head slice with 2, 4, 8, 16 tokens
//   prefill (a 128-token prompt, one batch at tpsrun's default --batch): expert 2880x2880
//                       with all 128 tokens, and with 16: what one expert
//                       gets of a 128-token prompt on average (x 4 of 32)
// and, as matmul_fixed/..., the split-invariant fixed-point products the
// attention output (2880x4096) and an expert's down projection (2880x2880)
// are computed with, beside the same shapes as float sums,
// and the attention of a decode step over 128 to 32768 cached positions,
// and of 64 prefill tokens against 16384 and 32768 (attention/prefill/...:
// tiles of 1, 4, 8 and 16 tokens that read the cache once).
// Weights stream from memory as in decode: each iteration uses the next of
// several copies of the matrix that together exceed 4x the L3, so no
// iteration finds its weights in cache. Reported per benchmark: weight
// GB/s (also as bytes_per_second), GFLOP/s, and stream_pct = weight GB/s as a
// % of the STREAM triad of the first NUMA node with cores (all its cores),
// measured at start-up. Threads and memory stay on that node. Not a test: it
// prints what it measured.
//   build/bin/bench_kernels [Google Benchmark flags, e.g. --benchmark_filter=avx2]
#include <benchmark/benchmark.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/cache/kv_pool.h"
#include "engine/gguf/ggml_types.h"
#include "engine/gguf/quant_blocks.h"
#include "engine/kernels/kernel_set.h"
#include "engine/kernels/matmul.h"
#include "engine/model/weights.h"
#include "runtime/error.h"
#include "runtime/page_buffer.h"
#include "runtime/thread_pool.h"
#include "topology/bandwidth.h"
#include "topology/machine.h"

namespace {

using namespace tps;

struct Shape {
  const char* name;
  int64_t rows, cols;
  int tokens;
};

// gpt-oss-20b: d = 2880, 64 query heads x 64 = 4096, expert width 2880.
constexpr Shape kShapes[] = {
    {"q_proj", 4096, 2880, 1},        {"o_proj", 2880, 4096, 1},        {"o_proj", 2880, 4096, 128},
    {"expert", 2880, 2880, 1},        {"output_slice", 16384, 2880, 1}, {"output_slice", 16384, 2880, 2},
    {"output_slice", 16384, 2880, 4}, {"output_slice", 16384, 2880, 8}, {"output_slice", 16384, 2880, 16},
    {"expert", 2880, 2880, 128},      {"expert", 2880, 2880, 16},
};

constexpr GgmlType kFormats[] = {GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::F32, GgmlType::F16, GgmlType::BF16};

// Several copies of one matrix with valid values (random floats put through
// the reference converters: no NaN, infinity or denormal scales), back to
// back in one buffer; copies x bytes >= min_bytes.
struct WeightPool {
  GgmlType type;
  int64_t rows = 0, cols = 0;
  uint64_t matrix_bytes = 0;
  int copies = 0;
  PageBuffer memory;

  Matrix copy(int i) const {
    const uint8_t* base = memory.data() + static_cast<uint64_t>(i) * matrix_bytes;
    return Matrix{type, rows, cols, base, matrix_bytes / rows};
  }
};

std::unique_ptr<WeightPool> make_pool(GgmlType type, int64_t rows, int64_t cols, uint64_t min_bytes) {
  auto pool = std::make_unique<WeightPool>();
  pool->type = type;
  pool->rows = rows;
  pool->cols = cols;
  const uint64_t rb = row_bytes(type, cols);
  pool->matrix_bytes = rb * rows;
  pool->copies = static_cast<int>(std::max<uint64_t>(2, (min_bytes + pool->matrix_bytes - 1) / pool->matrix_bytes));
  pool->memory = PageBuffer(pool->matrix_bytes * pool->copies + kPackedOverread);

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(cols);
  uint8_t* first = pool->memory.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = normal(rng);
    uint8_t* dst = first + r * rb;
    quantize_row(type, x.data(), dst, cols);
  }
  if (is_packed_type(type)) {  // as load_shard leaves them
    const std::vector<uint8_t> file(first, first + pool->matrix_bytes);
    pack_rows(type, file.data(), rb, first, rows, cols);
  }
  for (int i = 1; i < pool->copies; ++i) std::memcpy(first + i * pool->matrix_bytes, first, pool->matrix_bytes);
  return pool;
}

// What every benchmark shares: the node's bandwidth, the size weights must
// exceed, one pool per thread count, and the pool of weights last built
// (benchmarks of one format and shape follow each other, so it is reused).
struct Context {
  double stream_bytes_per_s = 0;
  uint64_t min_pool_bytes = 0;
  std::vector<std::unique_ptr<ThreadPool>> pools;  // by thread count - 1
  std::unique_ptr<WeightPool> weights;

  ThreadPool& pool(int threads) {
    if (pools.size() < static_cast<size_t>(threads)) pools.resize(threads);
    if (!pools[threads - 1]) pools[threads - 1] = std::make_unique<ThreadPool>(threads);
    return *pools[threads - 1];
  }
  const WeightPool& weights_for(GgmlType type, int64_t rows, int64_t cols) {
    if (!weights || weights->type != type || weights->rows != rows || weights->cols != cols) {
      weights.reset();  // free the last one before building the next
      weights = make_pool(type, rows, cols, min_pool_bytes);
    }
    return *weights;
  }
};

Context* ctx = nullptr;

// fixed: matmul_rows_fixed (split-invariant sums) instead of matmul_rows.
void bm_matmul(benchmark::State& state, Isa isa, GgmlType type, Shape shape, int threads, bool fixed) {
  const KernelSet& k = kernel_set(isa);
  const WeightPool& w = ctx->weights_for(type, shape.rows, shape.cols);
  ThreadPool& pool = ctx->pool(threads);

  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xf(static_cast<size_t>(shape.tokens) * shape.cols);
  for (float& v : xf) v = normal(rng);
  QuantizedActivations xq;
  xq.quantize(xf.data(), shape.tokens, shape.cols);
  const Activations x = xq.view(xf.data(), 0, shape.tokens);
  std::vector<float> y(static_cast<size_t>(shape.tokens) * shape.rows);
  std::vector<int64_t> y_fixed(y.size());

  int next = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const Matrix m = w.copy(next);
    next = (next + 1) % w.copies;
    ThreadPool::Chunks chunks(m.rows, row_grain(m), threads);
    pool.run([&](int, int) {
      for (int64_t begin, end; chunks.next(begin, end);)
        fixed ? static_cast<void>(matmul_rows_fixed(k, m, begin, end, x, nullptr, y_fixed.data(), m.rows))
              : matmul_rows(k, m, begin, end, x, y.data(), m.rows);
    });
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(y_fixed.data());
    benchmark::ClobberMemory();
  }
  // Rates over the loop's wall time (Google Benchmark's rate counters would
  // print a "/s" after a percentage).
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double bytes = static_cast<double>(w.matrix_bytes) * state.iterations();
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["stream_pct"] = 100.0 * bytes / seconds / ctx->stream_bytes_per_s;
  state.counters["GFLOP/s"] = 2.0 * shape.rows * shape.cols * shape.tokens * state.iterations() / seconds / 1e9;
}

// One gpt-oss-20b attention layer's cache (8 KV heads of 64 dimensions)
// holding `positions` random keys and values as `type`, its blocks in pool
// order (table), for the attention benchmarks.
constexpr int kKvHeads = 8, kDim = 64;
struct LayerCache {
  ModelConfig config;
  Shard shard;
  KvPool cache;
  std::vector<int32_t> table;
  LayerCache(KvType type, int positions, std::mt19937& rng) {
    config.n_layer = 1, config.n_head_kv = kKvHeads, config.head_dim = kDim, config.swa_pattern = 1;
    shard.share.layers = {0, 1}, shard.share.kv_heads = {0, kKvHeads};
    cache = KvPool(config, shard, type, blocks_for(positions), 0);
    table.resize(blocks_for(positions));
    std::iota(table.begin(), table.end(), 0);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> k(kKvHeads * kDim), v(kKvHeads * kDim);
    for (int p = 0; p < positions; ++p) {
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      cache.store(0, p / kKvBlock, p % kKvBlock, k.data(), v.data());
    }
  }
  // The KV bytes of `positions` positions as stored.
  double bytes(int positions) const {
    return static_cast<double>(KvPool::block_bytes(config, shard, cache.type(), BlockKind::full)) / kKvBlock *
           positions;
  }
};

// A decode step's attention in one layer of gpt-oss-20b: 64 query heads over
// 8 KV heads of 64 dimensions, at `positions` cached positions, the KV heads
// (each with its 8 query heads) split across the threads as the forward
// pass does (chunk x kv head items, then the merges), the positions in
// blocks in pool order, the cache in `type`.
// Reported: KV GB/s (the keys and values of the layer as stored, counted
// once).
void bm_attention(benchmark::State& state, Isa isa, KvType type, int positions, int threads) {
  const KernelSet& kernels = kernel_set(isa);
  constexpr int kHeads = 64;
  ThreadPool& pool = ctx->pool(threads);
  std::mt19937 rng(3);
  const LayerCache layer(type, positions, rng);
  const KvPool& cache = layer.cache;
  const std::vector<int32_t>& table = layer.table;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(kHeads * kDim), out(kHeads * kDim);
  for (float& x : q) x = normal(rng);
  constexpr int kGroup = kHeads / kKvHeads;
  const std::vector<float> sinks(kGroup, 0.0f);
  // The forward pass's work: (chunk, kv head) items over the threads in
  // runs of whole chunks, each chunk's state, then each kv head's merged in
  // order and finished.
  const int chunks = attention_chunks(0, positions - 1);
  const int64_t floats = attention_state_floats(kGroup, kDim);
  std::vector<float> partials(kKvHeads * chunks * floats), running(kKvHeads * floats);
  for (auto _ : state) {
    ThreadPool::Chunks items(kKvHeads * chunks, kKvHeads, threads);
    pool.run([&](int, int) {
      for (int64_t begin, end; items.next(begin, end);)
        for (int64_t i = begin; i < end; ++i) {
          const int c = static_cast<int>(i / kKvHeads), g = static_cast<int>(i % kKvHeads);
          cache.attend_chunk(kernels, 0, table, 0, q.data() + g * kGroup * kDim, kGroup, g, chunk_first(0, c),
                             chunk_last(0, positions - 1, c), 0.125f,
                             attention_state(partials.data() + i * floats, kGroup));
        }
    });
    pool.run([&](int t, int nt) {
      auto [begin, end] = ThreadPool::split(kKvHeads, t, nt);
      for (int64_t g = begin; g < end; ++g) {
        const AttentionState all = attention_state(running.data() + g * floats, kGroup);
        clear_attention_state(all, kGroup, kDim);
        for (int c = 0; c < chunks; ++c)
          merge_attention_state(attention_state(partials.data() + (c * kKvHeads + g) * floats, kGroup), all, kGroup,
                                kDim);
        finish_attention(all, sinks.data(), kGroup, kDim, out.data() + g * kGroup * kDim);
      }
    });
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = layer.bytes(positions);
  state.counters["GB/s"] = benchmark::Counter(bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// A prefill chunk's attention at depth in one layer of gpt-oss-20b: 64
// query tokens (64 heads each) over the 8 KV heads' `positions` cached
// positions, which every token sees whole (the diagonal, the tokens' own
// positions, is left out: it is a token's own work either way), as the
// forward pass's items: (tile of `tile` tokens, kv head, chunk), a tile's
// keys and values read once for its tokens (KvPool::attend_tile_chunk), or
// with tile 1 a token at a time (attend_chunk, the path before tiles); then
// each (token, kv head)'s chunks merged in order. Reported: tokens/s, and
// GB/s of the KV bytes the tokens attend to (each token's counted: what the
// token-at-a-time path reads).
void bm_prefill_tile(benchmark::State& state, Isa isa, KvType type, int positions, int tile, int threads) {
  const KernelSet& kernels = kernel_set(isa);
  constexpr int kTokens = 64, kHeads = 64, kGroup = kHeads / kKvHeads;
  ThreadPool& pool = ctx->pool(threads);
  std::mt19937 rng(3);
  const LayerCache layer(type, positions, rng);
  const KvPool& cache = layer.cache;
  const std::vector<int32_t>& table = layer.table;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(kTokens * kHeads * kDim);
  for (float& x : q) x = normal(rng);
  const int chunks = attention_chunks(0, positions - 1), tiles = kTokens / tile;
  const int64_t floats = attention_state_floats(kGroup, kDim);
  std::vector<float> partials(int64_t{kTokens} * kKvHeads * chunks * floats), running(kTokens * kKvHeads * floats);
  // State of token t, kv head g, chunk c.
  auto partial = [&](int t, int g, int c) {
    return attention_state(partials.data() + ((int64_t{t} * kKvHeads + g) * chunks + c) * floats, kGroup);
  };
  for (auto _ : state) {
    std::atomic<int> next{0};
    pool.run([&](int, int) {
      for (int i; (i = next.fetch_add(1, std::memory_order_relaxed)) < tiles * kKvHeads * chunks;) {
        const int t0 = i / (kKvHeads * chunks) * tile, g = i / chunks % kKvHeads, c = i % chunks;
        const float* qs[64];
        AttentionState states[64];
        for (int j = 0; j < tile; ++j)
          qs[j] = q.data() + (int64_t{t0 + j} * kHeads + g * kGroup) * kDim, states[j] = partial(t0 + j, g, c);
        if (tile == 1)
          cache.attend_chunk(kernels, 0, table, 0, qs[0], kGroup, g, chunk_first(0, c), chunk_last(0, positions - 1, c),
                             0.125f, states[0]);
        else
          cache.attend_tile_chunk(kernels, 0, table, 0, qs, tile, kGroup, g, chunk_first(0, c),
                                  chunk_last(0, positions - 1, c), 0.125f, states);
      }
    });
    pool.run([&](int th, int nt) {
      auto [begin, end] = ThreadPool::split(kTokens * kKvHeads, th, nt);
      for (int64_t r = begin; r < end; ++r) {
        const AttentionState all = attention_state(running.data() + r * floats, kGroup);
        clear_attention_state(all, kGroup, kDim);
        for (int c = 0; c < chunks; ++c)
          merge_attention_state(partial(static_cast<int>(r / kKvHeads), static_cast<int>(r % kKvHeads), c), all, kGroup,
                                kDim);
      }
    });
    benchmark::DoNotOptimize(running.data());
  }
  const double bytes = layer.bytes(positions);
  state.counters["tokens/s"] = benchmark::Counter(double{kTokens} * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(bytes * kTokens * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// Pins this thread (and so the pools' threads, which inherit it) to the PUs
// of the first NUMA node with usable cores, the node measure_bandwidth
// reports first; memory is then first touched there. Returns its usable
// cores (the first one's L3 size in l3_bytes).
int stay_on_first_node(const Machine& m, uint64_t& l3_bytes) {
  for (const NumaNode& node : m.numa_nodes) {
    cpu_set_t set;
    CPU_ZERO(&set);
    int cores = 0;
    for (int c : node.cores) {
      if (!m.core_is_usable(c)) continue;
      if (cores++ == 0) l3_bytes = m.cores[c].l3_bytes;
      for (int pu : m.cores[c].pus)
        if (std::find(m.available_pus.begin(), m.available_pus.end(), pu) != m.available_pus.end()) CPU_SET(pu, &set);
    }
    if (cores == 0) continue;
    if (sched_setaffinity(0, sizeof set, &set) != 0)
      throw Error(cat("bench_kernels: cannot bind to NUMA node ", node.os_index, "'s PUs"));
    return cores;
  }
  throw Error("bench_kernels: no NUMA node has usable cores");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  try {
    const Machine machine = discover_machine();
    uint64_t l3 = 0;
    const int cores = stay_on_first_node(machine, l3);
    std::vector<BandwidthResult> bw = measure_bandwidth(machine, 0, 5);
    Context context;
    context.stream_bytes_per_s = bw.at(0).best_gb_per_s * 1e9;
    context.min_pool_bytes = std::max<uint64_t>(4 * l3, 256ull << 20);
    ctx = &context;
    std::printf(
        "bench_kernels: memory bandwidth of %s: %.1f GB/s (STREAM triad, %d threads); "
        "weights in copies of at least %.0f MiB in all\n",
        bw[0].scope.c_str(), bw[0].best_gb_per_s, bw[0].threads, context.min_pool_bytes / 1048576.0);

    std::vector<int> thread_counts{1};
    if (cores > 1) thread_counts.push_back(cores);
    for (Isa isa : supported_isas())
      for (GgmlType type : kFormats)
        for (const Shape& s : kShapes)
          for (int threads : thread_counts) {
            // A prompt's batch is compute-bound: one thread shows the kernel.
            // A step of a few sequences' tokens streams the weights as decode does.
            if (s.tokens > 16 && threads > 1) continue;
            for (bool fixed : {false, true}) {
              if (fixed && std::string(s.name) != "o_proj" && !(std::string(s.name) == "expert" && s.tokens == 1))
                continue;
              std::string name = cat(fixed ? "matmul_fixed/" : "matmul/", isa_name(isa), "/", type_name(type), "/",
                                     s.name, "/", s.rows, "x", s.cols, "/tokens:", s.tokens, "/threads:", threads);
              benchmark::RegisterBenchmark(name.c_str(), bm_matmul, isa, type, s, threads, fixed)
                  ->UseRealTime()
                  ->Unit(benchmark::kMicrosecond);
            }
          }
    for (Isa isa : supported_isas())
      for (int t = 0; t < kKvTypeCount; ++t)
        for (int positions : {128, 1024, 4096, 16384, 32768})
          for (int threads : thread_counts)
            benchmark::RegisterBenchmark(cat("attention/", isa_name(isa), "/", kv_type_name(KvType(t)),
                                             "/positions:", positions, "/threads:", threads)
                                             .c_str(),
                                         bm_attention, isa, KvType(t), positions, threads)
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
    for (Isa isa : supported_isas())
      for (int t = 0; t < kKvTypeCount; ++t)
        for (int positions : {16384, 32768})
          for (int tile : {1, 4, 8, 16})
            for (int threads : thread_counts)
              benchmark::RegisterBenchmark(cat("attention/prefill/", isa_name(isa), "/", kv_type_name(KvType(t)),
                                               "/positions:", positions, "/tile:", tile, "/threads:", threads)
                                               .c_str(),
                                           bm_prefill_tile, isa, KvType(t), positions, tile, threads)
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
