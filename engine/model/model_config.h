// The gpt-oss hyperparameters, read from GGUF metadata as llama.cpp writes
// it, and the tensors a forward pass needs, checked against them.
//
// Key names and defaults: ../shared/spec/gpt-oss.md §4.2. Constants that the
// file does not store (SwiGLU alpha/limit, YaRN betas) have llama.cpp's and
// the OpenAI reference's values.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/model/quantize_plan.h"
#include "topology/model_shape.h"

namespace tps {

class GgufFile;

struct ModelConfig {
  std::string architecture = "gpt-oss";
  std::string name;        // general.name, informational
  uint32_t n_layer = 0;    // gpt-oss.block_count
  uint32_t n_embd = 0;     // residual width d
  uint32_t n_head = 0;     // query heads
  uint32_t n_head_kv = 0;  // key/value heads (GQA)
  uint32_t head_dim = 0;   // attention.key_length (= value_length)
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;   // top-k
  uint32_t n_ff_exp = 0;        // expert intermediate size
  uint32_t n_vocab = 0;         // rows of token_embd
  uint32_t n_ctx_train = 0;     // context_length
  uint32_t sliding_window = 0;  // attention.sliding_window (tokens)
  uint32_t swa_pattern = 2;     // attention.sliding_window_pattern
  float rope_base = 150000.0f;
  float rope_scaling_factor = 32.0f;  // YaRN factor (llama.cpp: freq_scale = 1/factor)
  uint32_t rope_orig_ctx = 4096;      // YaRN original context
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float rms_eps = 1e-5f;
  float swiglu_alpha = 1.702f;  // not in the file; hard-coded in both references
  float swiglu_limit = 7.0f;

  // Layer l uses the sliding window: llama.cpp's rule for a pattern of n is
  // (l % n) < n - 1, so for n = 2 the even layers slide; n = 0 means all do.
  bool is_sliding_layer(uint32_t layer) const;
  uint32_t q_width() const { return n_head * head_dim; }
  uint32_t kv_width() const { return n_head_kv * head_dim; }
};

// One tensor of the model as the forward pass needs it.
struct TensorSpec {
  std::string name;  // GGUF name, e.g. "blk.3.attn_q.weight"
  int n_dims = 1;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ggml order: ne[0] innermost
  enum class Role { matrix, expert_matrix, router, vector } role = Role::vector;
};

// Every tensor a gpt-oss forward pass reads, in the order llama.cpp's
// converter writes them (token_embd, per layer, output_norm, output).
std::vector<TensorSpec> gpt_oss_tensors(const ModelConfig& config);

// Tensor types tps can compute with, per role. Matrices: F32, F16, BF16,
// Q8_0, MXFP4; router: F32, F16, BF16; vectors (norms, biases, sinks): F32.
// Community files that store attention in Q4_K/Q6_K are refused by name.
bool type_supported(TensorSpec::Role role, GgmlType type);

// Reads the config from a GGUF file and checks every tensor in
// gpt_oss_tensors(): present, right shape, supported type. Throws InputError
// naming the file and the key or tensor: another architecture, a missing key
// or tensor, a wrong shape, an unsupported type.
ModelConfig read_model_config(const GgufFile& file);

// Checks that the vector tensors (norm weights, biases, sinks: F32, a few
// MB in all) hold only finite values; InputError naming the first that
// does not. A NaN there turns every token into garbage.
void check_vector_tensors(const GgufFile& file, const ModelConfig& config);

// Bytes per layer, embeddings and output head, for planning: of the types
// the plan converts the tensors to (--quantize), or the file's.
ModelShape model_shape(const GgufFile& file, const ModelConfig& config, const QuantizePlan& plan = {});
// The same from any list of tensors (their data unused), `where` naming them
// in errors: a preset's, planned without its file (tpstopo --preset).
ModelShape model_shape(std::span<const TensorView> tensors, const ModelConfig& config, const QuantizePlan& plan,
                       const std::string& where);

}  // namespace tps
