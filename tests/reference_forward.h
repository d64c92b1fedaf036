// The plain reference forward pass of gpt-oss: the oracle the engine is
// tested against. Written separately from the engine, straight from the
// math (spec §2): weights dequantized to float once, no SIMD, no threads,
// no KV cache (every position attends by recomputation), double
// accumulators. Slow by design; for the tiny and small presets.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/gguf_reader.h"
#include "engine/model_config.h"

namespace tps::testing {

class ReferenceModel {
 public:
  // yarn_truncate: round the YaRN correction range as llama.cpp does.
  ReferenceModel(const GgufFile& file, bool yarn_truncate);

  // Logits after every position of tokens (teacher forcing): [T][n_vocab].
  std::vector<std::vector<float>> forward(const std::vector<int32_t>& tokens) const;

  const ModelConfig& config() const { return c_; }

 private:
  struct Matrix {  // rows x cols, row-major
    int rows = 0, cols = 0;
    std::vector<float> w;
    const float* row(int r) const { return w.data() + static_cast<size_t>(r) * cols; }
  };
  struct Layer {
    std::vector<float> attn_norm, post_norm, bq, bk, bv, bo, sinks, router_b;
    Matrix wq, wk, wv, wo, router;
    std::vector<Matrix> gate, up, down;  // [expert]
    std::vector<std::vector<float>> gate_b, up_b, down_b;
  };
  Matrix matrix(const GgufFile& f, const std::string& name, int expert = -1) const;
  std::vector<float> vec(const GgufFile& f, const std::string& name, int row = -1) const;

  ModelConfig c_;
  bool truncate_;
  Matrix embd_, out_;
  std::vector<float> out_norm_;
  std::vector<Layer> layers_;
};

}  // namespace tps::testing
