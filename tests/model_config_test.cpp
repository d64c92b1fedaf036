// The config read from GGUF metadata and the tensors checked against it: a
// synthetic file reloads and passes; files of another architecture, with a
// missing or misshapen tensor, or an unsupported type, are refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quant_blocks.h"
#include "engine/model/model_config.h"
#include "engine/model/synthetic_model.h"
#include "engine/text/o200k_vocab.h"
#include "runtime/error.h"
#include "tests/temp_path.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using testing::temp_path;
using testing::test_vocab;

TEST(ModelConfig, TinyRoundTrip) {
  SyntheticSpec spec = synthetic_preset("tiny");
  std::string path = temp_path("tiny.gguf");
  uint64_t last = 0;
  write_synthetic_model(spec, test_vocab(), path, [&](uint64_t done, uint64_t) { last = done; });
  EXPECT_EQ(last, synthetic_tensor_bytes(spec));
  GgufFile f = GgufFile::open(path);
  ModelConfig c = read_model_config(f);
  EXPECT_EQ(c.n_layer, spec.config.n_layer);
  EXPECT_EQ(c.n_embd, spec.config.n_embd);
  EXPECT_EQ(c.n_vocab, 201088u);
  EXPECT_EQ(c.sliding_window, spec.config.sliding_window);
  EXPECT_FLOAT_EQ(c.rope_base, 150000.0f);
  EXPECT_EQ(f.tensor("blk.1.ffn_down_exps.weight").type, GgmlType::MXFP4);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, GgmlType::Q8_0);
  EXPECT_EQ(f.tensor("blk.0.ffn_gate_inp.weight").type, GgmlType::F32);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 201088u);
  std::filesystem::remove(path);
}

// A tiny model with one thing changed, written through the same writer.
std::string variant(const std::string& name, const std::function<void(GgufWriter&)>& meta,
                    const std::string& skip_tensor, GgmlType router_type = GgmlType::F32, uint64_t q_rows = 0,
                    GgmlType q_type = GgmlType::F32, const std::string& nan_tensor = "") {
  SyntheticSpec spec = synthetic_preset("tiny");
  ModelConfig c = spec.config;
  c.n_layer = 1;
  std::string path = temp_path(name);
  GgufWriter w(path);
  meta(w);
  std::vector<TensorSpec> tensors = gpt_oss_tensors(c);
  std::vector<std::pair<std::string, uint64_t>> sizes;
  for (TensorSpec t : tensors) {
    if (t.name == skip_tensor) continue;
    GgmlType type = t.role == TensorSpec::Role::vector   ? GgmlType::F32
                    : t.role == TensorSpec::Role::router ? router_type
                    : t.name == "blk.0.attn_q.weight"    ? q_type
                                                         : GgmlType::F32;
    if (q_rows && t.name == "blk.0.attn_q.weight") t.ne[1] = q_rows;
    w.add_tensor(t.name, type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
    sizes.emplace_back(t.name, row_bytes(type, t.ne[0]) * t.ne[1] * t.ne[2] * t.ne[3]);
  }
  w.begin_data();
  for (auto& [n, bytes] : sizes) {
    std::vector<float> values((bytes + 3) / sizeof(float), n == nan_tensor ? std::nanf("") : 0.0f);
    w.write_tensor_data(n, values.data(), bytes);
  }
  w.finish();
  return path;
}

// skip: a key (after "gpt-oss.") left out, for the caller to write its own.
void tiny_metadata(GgufWriter& w, const std::string& arch, const std::string& skip = "") {
  ModelConfig c = synthetic_preset("tiny").config;
  w.add_string("general.architecture", arch);
  const std::string a = arch + ".";
  auto u32 = [&](const std::string& key, uint32_t v) {
    if (key != skip) w.add_u32(a + key, v);
  };
  auto f32 = [&](const std::string& key, float v) {
    if (key != skip) w.add_f32(a + key, v);
  };
  u32("block_count", 1);
  u32("context_length", c.n_ctx_train);
  u32("embedding_length", c.n_embd);
  u32("attention.head_count", c.n_head);
  u32("attention.head_count_kv", c.n_head_kv);
  u32("attention.key_length", c.head_dim);
  u32("expert_count", c.n_expert);
  u32("expert_used_count", c.n_expert_used);
  u32("expert_feed_forward_length", c.n_ff_exp);
  u32("attention.sliding_window", c.sliding_window);
  f32("attention.layer_norm_rms_epsilon", 1e-5f);
  f32("rope.freq_base", 150000.0f);
}

void expect_refused(const std::string& path, const std::string& fragment) {
  try {
    GgufFile f = GgufFile::open(path);
    read_model_config(f);
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(ModelConfig, RefusesWhatItCannotRun) {
  auto gpt_oss = [](GgufWriter& w) { tiny_metadata(w, "gpt-oss"); };
  // The baseline variant is accepted (F32 everywhere is a supported file).
  {
    std::string ok = variant("ok.gguf", gpt_oss, "");
    GgufFile f = GgufFile::open(ok);
    EXPECT_EQ(read_model_config(f).n_layer, 1u);
    std::filesystem::remove(ok);
  }
  expect_refused(variant(
                     "llama.gguf", [](GgufWriter& w) { tiny_metadata(w, "llama"); }, ""),
                 "general.architecture is 'llama'");
  expect_refused(variant("missing.gguf", gpt_oss, "blk.0.attn_sinks.weight"),
                 "tensor 'blk.0.attn_sinks.weight' is missing");
  expect_refused(variant("shape.gguf", gpt_oss, "", GgmlType::F32, 96),
                 "tensor 'blk.0.attn_q.weight' has shape [64, 96], expected [64, 64]");
  expect_refused(variant("type.gguf", gpt_oss, "", GgmlType::Q8_0), "tensor 'blk.0.ffn_gate_inp.weight' has type Q8_0");
  // A block type no kernel takes (Q8_1 is ggml's activation format).
  expect_refused(variant("q8_1.gguf", gpt_oss, "", GgmlType::F32, 0, GgmlType::Q8_1),
                 "tensor 'blk.0.attn_q.weight' has type Q8_1, which tps cannot compute with here");
  expect_refused(variant(
                     "nokey.gguf", [](GgufWriter& w) { w.add_string("general.architecture", "gpt-oss"); }, ""),
                 "gpt-oss.block_count");
}

// Numbers that would make every token garbage, or a count that would take
// long to find wrong, are refused by name.
TEST(ModelConfig, RefusesCorruptNumbers) {
  auto replaced = [](const std::string& key, const std::function<void(GgufWriter&)>& write) {
    return [key, write](GgufWriter& w) {
      tiny_metadata(w, "gpt-oss", key);
      write(w);
    };
  };
  const float nan = std::nanf("");
  expect_refused(
      variant("base.gguf", replaced("rope.freq_base", [&](GgufWriter& w) { w.add_f32("gpt-oss.rope.freq_base", nan); }),
              ""),
      "gpt-oss.rope.freq_base is nan");
  expect_refused(variant("eps.gguf",
                         replaced("attention.layer_norm_rms_epsilon",
                                  [](GgufWriter& w) { w.add_f32("gpt-oss.attention.layer_norm_rms_epsilon", -1e-5f); }),
                         ""),
                 "layer_norm_rms_epsilon is -1e-05");
  expect_refused(
      variant("yarn.gguf", replaced("", [](GgufWriter& w) { w.add_f32("gpt-oss.rope.scaling.factor", 0); }), ""),
      "rope.scaling.factor is 0");
  expect_refused(
      variant("layers.gguf",
              replaced("block_count", [](GgufWriter& w) { w.add_u32("gpt-oss.block_count", 0xffffffffu); }), ""),
      "block_count 4294967295 is more than the file's");
  expect_refused(
      variant("eos.gguf", replaced("", [](GgufWriter& w) { w.add_u32("tokenizer.ggml.eos_token_id", 1u << 30); }), ""),
      "tokenizer.ggml.eos_token_id is 1073741824, outside the vocabulary");
}

TEST(ModelConfig, RefusesNonFiniteVectors) {
  const std::string path = variant(
      "nan.gguf", [](GgufWriter& w) { tiny_metadata(w, "gpt-oss"); }, "", GgmlType::F32, 0, GgmlType::F32,
      "blk.0.post_attention_norm.weight");
  GgufFile f = GgufFile::open(path);
  const ModelConfig c = read_model_config(f);
  try {
    check_vector_tensors(f, c);
    ADD_FAILURE() << "a NaN norm weight was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.0.post_attention_norm.weight' holds nan at index 0"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tps
