// Synthetic gpt-oss GGUF files: the architecture, tensor names, shapes,
// types and metadata of the real MXFP4 release (spec §4), seeded random
// weights, and the real o200k_harmony vocabulary. They are tps's embedded
// default model, its test fixtures, and its full-size benchmark models.
//
// Weights are a pure function of (shape, seed): raw splitmix64 bits turned
// into values with integer arithmetic and exact float operations, so a file's
// bytes never depend on a library version. Scales follow measured lessons
// (../shared/notes/synthetic-models.md): unit-gain q/k/v and gate/up
// (std 1/sqrt(fan_in)), half-gain branch outputs (attention output, expert
// down), router gain 3, output gain 2 -- activations stay finite and the
// next-token distribution is neither flat nor one-hot.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/text/o200k_vocab.h"

namespace tps {

struct SyntheticSpec {
  std::string preset;  // tiny, small, 20b-4l, 20b, 120b-4l, 120b
  ModelConfig config;
  uint64_t seed = 1;
  GgmlType dense_type = GgmlType::Q8_0;    // attention, embeddings, output (as the release)
  GgmlType expert_type = GgmlType::MXFP4;  // expert matrices
  // Types by role, in order, the last that names a tensor winning (tps-mkmodel
  // --type ROLE=TYPE): a matrix's kind (token_embd, output, attn_q, attn_k,
  // attn_v, attn_output, ffn_gate_exps, ffn_up_exps, ffn_down_exps), or attn
  // (q, k, v, output), experts (the three), dense (all but the experts).
  std::vector<std::pair<std::string, GgmlType>> types;
  // tps-mkmodel --split-max-size: parts of whole tensors, each at most this
  // many bytes of them unless one tensor is more (0: one file).
  uint64_t split_max_bytes = 0;
  // Q8_0 and MXFP4 tensors rounded from the values every other type rounds
  // (F32's), so that one seed is one model in every type (quality
  // comparisons); by default they are drawn as codes directly, faster to
  // make and as the release's statistics have them -- another model.
  bool rounded = false;
};

// Parses "ROLE=TYPE,ROLE=TYPE" (types by ggml name, e.g. Q4_K) into
// spec.types; an unknown role or type, or a type the tensors it names cannot
// take (rows not whole blocks of it), is an InputError naming it.
void set_synthetic_types(SyntheticSpec& spec, const std::string& text);

// The type the spec writes a tensor in.
GgmlType synthetic_type(const TensorSpec& tensor, const SyntheticSpec& spec);

// The named presets; throws InputError listing them for an unknown name.
SyntheticSpec synthetic_preset(const std::string& name);
std::vector<std::string> synthetic_preset_names();

// Bytes of tensor data the spec produces (without metadata).
uint64_t synthetic_tensor_bytes(const SyntheticSpec& spec);

// The planning shape of the file the spec writes, without writing it (a
// 120b is 63 GB): tpstopo --preset.
ModelShape synthetic_model_shape(const SyntheticSpec& spec, const QuantizePlan& plan);

// The files write_synthetic_model writes for path: path itself, or a split
// model's parts PATH-less-.gguf-0000i-of-0000N.gguf.
std::vector<std::string> synthetic_model_paths(const SyntheticSpec& spec, const std::string& path);

// Writes the model to path, or to its parts, as runtime/output_file.h writes
// files: every part beside its path, renamed there once all are whole.
// progress(done_bytes, total_bytes) is called every few MB of tensor data;
// inputs are the files the run reads (which no part may be).
void write_synthetic_model(const SyntheticSpec& spec, const Vocab& vocab, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress,
                           const std::vector<std::string>& inputs = {});

// Streams the values of one tensor: deterministic in (name, seed), the same
// whatever the chunking. Exposed for tests.
class TensorGenerator {
 public:
  // rounded: see SyntheticSpec::rounded.
  TensorGenerator(const TensorSpec& tensor, GgmlType type, float stddev, float mean, uint64_t seed,
                  bool rounded = false);
  // Fills out with the next rows (whole rows only); returns bytes written.
  size_t next_rows(uint8_t* out, uint64_t rows);
  uint64_t row_bytes() const { return row_bytes_; }

 private:
  uint64_t next();
  size_t rounded_rows(uint8_t* out, uint64_t rows);  // F32's values, rounded to the type
  GgmlType type_;
  bool rounded_;
  uint64_t row_elems_, row_bytes_;
  float std_, mean_;
  uint64_t state_;
  // MXFP4: the two block exponents and the probability (out of 2^32) of the
  // larger one, so that the mean square of the values matches stddev^2.
  int exp_lo_ = 0;
  uint64_t p_hi_ = 0;
};

}  // namespace tps
