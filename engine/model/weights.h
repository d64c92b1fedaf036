// A rank's weights as the forward pass reads them: its share of the model
// (a shard: a range of layers, of KV heads, of experts, of expert features,
// of vocabulary rows -- topology/model_shape.h decides), copied out of the
// memory-mapped file into memory of the rank's own, which the rank's memory
// policy places on its NUMA node. Shapes in comments are [rows, cols] with
// rows the output features, and are the *local* shapes: q = the shard's query
// heads x head_dim, kv = its KV heads x head_dim, E = its experts, ff = its
// features of each expert, vocab = its output rows.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/kernels/matrix.h"
#include "engine/model/model_config.h"
#include "engine/model/quantize_plan.h"
#include "runtime/page_buffer.h"
#include "runtime/thread_pool.h"
#include "topology/model_shape.h"

namespace tps {

class GgufFile;

struct LayerWeights {
  const float* attn_norm;          // [d]
  Matrix wq, wk, wv, wo;           // [q, d], [kv, d], [kv, d], [d, q]
  const float *bq, *bk, *bv, *bo;  // [q], [kv], [kv], [d] (bo: whole, added after the sum)
  const float* sinks;              // [the shard's query heads]
  const float* post_norm;          // [d] (the pre-MoE norm)
  Matrix router;                   // [all experts, d] (every rank routes)
  const float* router_b;           // [all experts]
  Matrix gate, up, down;           // [E * ff, d], [E * ff, d], [E * d, ff]
  const float *gate_b, *up_b;      // [E][ff]
  const float* down_b;             // [all experts][d] (added after the sum)
};

struct ModelWeights {
  Matrix embd;                       // [vocab, d], all rows: a view of the file mapping
  std::vector<LayerWeights> layers;  // by global layer; only the shard's are filled
  const float* out_norm = nullptr;   // [d]
  Matrix output;                     // [the shard's vocabulary rows, d]
};

// This rank's part of the model and the split that gave it.
struct Shard {
  SplitMode mode = SplitMode::tensor;
  int rank = 0, ranks = 1;
  RankShare share;  // global ranges
  // Splits inside each layer, whose partial results are summed across ranks.
  bool sums_per_layer() const { return mode != SplitMode::layers && ranks > 1; }
  // Layers mode: the ranks before and after this one in the pipeline.
  bool first_stage() const { return mode != SplitMode::layers || rank == 0; }
  bool last_stage() const { return mode != SplitMode::layers || rank == ranks - 1; }
};

// Rank `rank` of `ranks` in the given mode (topology/model_shape.h's plan);
// one rank holds the whole model.
Shard plan_shard(const ModelShape& shape, SplitMode mode, int rank, int ranks);

struct RankWeights {
  PageBuffer memory;   // the shard's tensors, each 64-byte aligned
  ModelWeights views;  // into memory, and into the file mapping for embd (unless converted)
};

// Copies the shard's slices of every tensor out of the file into memory of
// its own, on the pool's threads (so its pages are first touched by the
// rank's pinned threads, on the rank's node), dropping the file pages from
// this process as it goes; rows are converted to the types the plan names
// (--quantize) and rows of the kernels' types repacked for them
// (kernels/packed_rows.h) on the way. progress(done, total) reports bytes
// copied.
// Throws InputError when a tensor cannot be cut as the shard needs (columns
// inside a quantization block) or converted as the plan asks.
RankWeights load_shard(const GgufFile& file, const ModelConfig& config, const Shard& shard, const QuantizePlan& plan,
                       ThreadPool& pool, const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

// The bytes load_shard allocates for the shard (rows as the kernels hold
// them, in the plan's types), from the file's header alone; throws as
// load_shard does.
uint64_t shard_bytes(const GgufFile& file, const ModelConfig& config, const Shard& shard, const QuantizePlan& plan);

// Drops the file's pages from the page cache -- but for the token
// embeddings when they are still read through the mapping -- once every
// rank on the host has its copy, so the machine holds about one copy of the
// model.
void drop_file_cache(const GgufFile& file, bool keep_embeddings);

// Weight bytes this rank reads in one decode step: its attention, router and
// output matrices and vectors, one embedding row, and its share of the top-k
// experts (in experts mode the expected share: k x its experts / all experts).
// The numerator of the decode roofline (tokens/s x bytes / bandwidth).
uint64_t decode_bytes_per_token(const ModelWeights& weights, const ModelConfig& config, const Shard& shard);

}  // namespace tps
