// A model's weights as the forward pass reads them: views (pointer, type,
// shape) into memory that something else owns -- the mapped file today,
// node-local copies once weights are distributed. Shapes in comments are
// [rows, cols] with rows the output features.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ggml_types.h"
#include "engine/model_config.h"

namespace tps {

class GgufFile;

struct Matrix {
  GgmlType type = GgmlType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;
  const uint8_t* row(int64_t r) const { return data + r * row_bytes; }
  // Rows [first, first + count): one expert of a 3-D expert tensor.
  Matrix slice(int64_t first, int64_t count) const {
    return Matrix{type, count, cols, row(first), row_bytes};
  }
  // Weights whose dot products take activations quantized to Q8_0.
  bool wants_q8() const { return type == GgmlType::Q8_0 || type == GgmlType::MXFP4; }
};

struct LayerWeights {
  const float* attn_norm;  // [d]
  Matrix wq, wk, wv, wo;   // [q, d], [kv, d], [kv, d], [d, q]
  const float *bq, *bk, *bv, *bo;  // [q], [kv], [kv], [d]
  const float* sinks;      // [n_head]
  const float* post_norm;  // [d] (the pre-MoE norm)
  Matrix router;           // [E, d]
  const float* router_b;   // [E]
  Matrix gate, up, down;   // [E * ff, d], [E * ff, d], [E * d, ff]
  const float *gate_b, *up_b, *down_b;  // [E][ff], [E][ff], [E][d]
};

struct ModelWeights {
  Matrix embd;             // [vocab, d]
  std::vector<LayerWeights> layers;
  const float* out_norm;   // [d]
  Matrix output;           // [vocab, d]
};

// Views of a file's tensors whose config read_model_config() has checked.
// tensor_data is where the file's data section lives: the mapping itself
// (nullptr) or a copy of it.
ModelWeights map_weights(const GgufFile& file, const ModelConfig& config,
                         const uint8_t* tensor_data = nullptr);

// Weight bytes one decode step reads: every attention, router and output
// matrix and vector, the top-k experts of each layer, one embedding row.
// The numerator of the decode roofline (tokens/s x bytes / bandwidth).
uint64_t decode_bytes_per_token(const ModelWeights& weights, const ModelConfig& config);

}  // namespace tps
