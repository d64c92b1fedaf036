// The few facts about a model that planning needs, filled by the engine
// from a model file so that topology/ never reads model formats.
#pragma once

#include <cstdint>
#include <vector>

namespace tps {

struct ModelShape {
  std::vector<uint64_t> layer_bytes;  // weight bytes of each transformer block
  uint64_t input_bytes = 0;           // token embeddings (read one row per token)
  uint64_t output_bytes = 0;          // final norm and unembedding
  uint64_t total() const;
};

// Pipeline split: each rank owns a contiguous range of layers, balanced by
// bytes; rank 0 also holds the embeddings, the last rank the output head.
struct LayerRange {
  int begin = 0, end = 0;  // [begin, end) layers
  uint64_t bytes = 0;      // everything the rank holds
};
// Throws InputError when ranks < 1 or ranks > layers.
std::vector<LayerRange> split_layers(const ModelShape& shape, int ranks);

}  // namespace tps
