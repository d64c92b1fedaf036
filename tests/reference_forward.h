// The plain reference forward pass of gpt-oss: the oracle the engine is
// tested against. Written separately from the engine, straight from the
// math (spec §2): weights dequantized to float once, no SIMD, no threads,
// no KV cache (every position attends by recomputation), double
// accumulators. Slow by design; for the tiny and small presets.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"

namespace tps::testing {

class ReferenceModel {
 public:
  // yarn_truncate: round the YaRN correction range as llama.cpp does.
  // q8_inputs: round the input of every product with block-quantized
  // weights to Q8_0 first, as llama.cpp's CPU backend (and tps) do; the rest of the
  // arithmetic stays exact.
  ReferenceModel(const GgufFile& file, bool yarn_truncate, bool q8_inputs);

  // Logits after every position of tokens (teacher forcing): [T][n_vocab],
  // or only after the last one ([1][n_vocab]) when last_only.
  std::vector<std::vector<float>> forward(const std::vector<int32_t>& tokens, bool last_only = false) const;

  const ModelConfig& config() const { return c_; }

 private:
  struct Matrix {  // rows x cols, row-major
    int rows = 0, cols = 0;
    bool q8_inputs = false;  // its products see Q8_0-rounded inputs
    std::vector<float> w;
    const float* row(int r) const { return w.data() + static_cast<size_t>(r) * cols; }
  };
  struct Layer {
    std::vector<float> attn_norm, post_norm, bq, bk, bv, bo, sinks, router_b;
    Matrix wq, wk, wv, wo, router;
    std::vector<Matrix> gate, up, down;  // [expert]
    std::vector<std::vector<float>> gate_b, up_b, down_b;
  };
  std::vector<double> matvec(const Matrix& m, const double* x) const;
  std::vector<std::vector<double>> matmul(const Matrix& m, std::vector<std::vector<double>> xs) const;
  Matrix matrix(const GgufFile& f, const std::string& name, int expert = -1) const;
  std::vector<float> vec(const GgufFile& f, const std::string& name, int row = -1) const;

  ModelConfig c_;
  bool truncate_, q8_;
  Matrix embd_, out_;
  std::vector<float> out_norm_;
  std::vector<Layer> layers_;
};

}  // namespace tps::testing
