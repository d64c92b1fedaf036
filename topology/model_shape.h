// The few facts about a model that planning needs, filled by the engine
// from a model file so that topology/ never reads model formats.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tps {

struct ModelShape {
  std::vector<uint64_t> layer_bytes;  // weight bytes of each transformer block
  uint64_t input_bytes = 0;           // token embeddings (read one row per token)
  uint64_t output_bytes = 0;          // final norm and unembedding
  uint64_t total() const;

  // What the splits that cut through layers cut, summed over all layers.
  int kv_heads = 0;               // attention is cut by KV-head group
  uint64_t attention_bytes = 0;   // q, k, v, output projections, biases, sinks
  int experts = 0;                // experts mode cuts whole experts
  int ff = 0;                     // tensor mode cuts expert features, in blocks of 32
  uint64_t expert_bytes = 0;      // expert gate, up, down and their biases
  uint64_t replicated_bytes = 0;  // norms and routers: every rank holds them
  int vocab = 0;                  // the output head is cut by vocabulary rows
};

// Pipeline split: each rank owns a contiguous range of layers, balanced by
// bytes; rank 0 also holds the embeddings, the last rank the output head.
struct LayerRange {
  int begin = 0, end = 0;  // [begin, end) layers
  uint64_t bytes = 0;      // everything the rank holds
};
// Throws InputError when ranks < 1 or ranks > layers.
std::vector<LayerRange> split_layers(const ModelShape& shape, int ranks);

// The three ways to split gpt-oss across ranks (docs/ARCHITECTURE.md):
//   layers  -- a contiguous range of layers each (pipeline);
//   experts -- whole experts of every layer, attention by KV-head group, the
//              output head by vocabulary rows;
//   tensor  -- a slice of every expert's features (whole 32-value blocks),
//              attention by KV-head group, the output head by vocabulary rows.
enum class SplitMode { layers, experts, tensor };
const char* split_mode_name(SplitMode mode);
// "layers", "experts" or "tensor"; InputError otherwise.
SplitMode parse_split_mode(const std::string& name);

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
// Rank r's contiguous share of n units cut in granules (n a multiple of
// granule): shares differ by at most one granule.
Range even_share(int64_t n, int64_t granule, int rank, int ranks);

struct RankShare {
  Range layers;    // layers mode: [begin, end) layers; others: all layers
  Range kv_heads;  // experts/tensor: KV heads (and their query heads)
  Range experts;   // experts mode: whole experts
  Range ff;        // tensor mode: expert features
  Range vocab;     // experts/tensor: output rows
  uint64_t bytes = 0;  // weights the rank holds (embeddings on every rank)
};
// Every rank's share; throws InputError naming the counts when a mode cannot
// give every rank work (more ranks than layers, experts, or feature blocks).
std::vector<RankShare> plan_split(const ModelShape& shape, SplitMode mode, int ranks);

}  // namespace tps
