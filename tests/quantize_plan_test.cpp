// --quantize: what each role becomes, what is refused, and that a shard
// loaded with conversions holds exactly the plain conversion of the file's
// rows -- decoded, encoded by quant_blocks' reference, packed -- for every
// kind of slice a split cuts (rows, columns, experts, the embeddings).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/quant_blocks.h"
#include "engine/kernels/packed_rows.h"
#include "engine/model/model_config.h"
#include "engine/model/quantize_plan.h"
#include "engine/model/synthetic_model.h"
#include "engine/model/weights.h"
#include "runtime/error.h"
#include "tests/temp_path.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

TensorView tensor(const char* name, GgmlType type, uint64_t cols) {
  TensorView t;
  t.name = name;
  t.type = type;
  t.ne = {cols, 8, 1, 1};
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(QuantizePlan, RolesAndPresets) {
  EXPECT_EQ(weight_role("blk.3.attn_output.weight"), WeightRole::attn);
  EXPECT_EQ(weight_role("blk.0.ffn_down_exps.weight"), WeightRole::experts);
  EXPECT_EQ(weight_role("token_embd.weight"), WeightRole::embed);
  EXPECT_EQ(weight_role("output.weight"), WeightRole::output);
  for (const char* other : {"blk.0.ffn_gate_inp.weight", "blk.0.attn_q.bias", "output_norm.weight", "blk.0.attn_sinks"})
    EXPECT_FALSE(weight_role(other)) << other;

  EXPECT_TRUE(parse_quantize("").empty());
  const QuantizePlan int8 = parse_quantize("INT8");  // any case, as types
  for (const auto& t : int8.target) EXPECT_EQ(t, GgmlType::Q8_0);
  const QuantizePlan int4 = parse_quantize("int4");
  EXPECT_EQ(int4.target[static_cast<int>(WeightRole::attn)], GgmlType::Q4_0);
  EXPECT_EQ(int4.target[static_cast<int>(WeightRole::experts)], GgmlType::MXFP4);
  EXPECT_EQ(int4.target[static_cast<int>(WeightRole::output)], GgmlType::Q8_0);
  const QuantizePlan mixed = parse_quantize("all=q8_0,Experts=Q4_K");  // the last naming a role wins
  EXPECT_EQ(mixed.target[static_cast<int>(WeightRole::embed)], GgmlType::Q8_0);
  EXPECT_EQ(mixed.target[static_cast<int>(WeightRole::experts)], GgmlType::Q4_K);
  EXPECT_FALSE(mixed.preset);
}

TEST(QuantizePlan, BadTextNamesTheFlagAndThePart) {
  EXPECT_NE(error_of([] { parse_quantize("int2"); }).find("expected int8, int4 or ROLE=TYPE"), std::string::npos);
  EXPECT_NE(error_of([] { parse_quantize("attn=f16"); }).find("'f16' is not a type tps quantizes to"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_quantize("router=q8_0"); }).find("'router' is not a role"), std::string::npos);
  EXPECT_NE(error_of([] { parse_quantize("attn=q8_0,"); }).find("got ''"), std::string::npos);
  EXPECT_NE(error_of([] { parse_quantize("attn="); }).find("--quantize attn="), std::string::npos);
}

TEST(QuantizePlan, WhatConvertsAndWhatIsRefused) {
  const QuantizePlan q8 = parse_quantize("all=q8_0"), q4 = parse_quantize("attn=q4_0,experts=q4_k");
  // From 16 and 32 bits; Q8_0 only to fewer bits.
  EXPECT_EQ(q8.type_for(tensor("blk.0.attn_q.weight", GgmlType::F16, 2880), "m"), GgmlType::Q8_0);
  EXPECT_EQ(q8.type_for(tensor("output.weight", GgmlType::BF16, 2880), "m"), GgmlType::Q8_0);
  EXPECT_EQ(q8.type_for(tensor("token_embd.weight", GgmlType::F32, 64), "m"), GgmlType::Q8_0);
  EXPECT_EQ(q8.type_for(tensor("token_embd.weight", GgmlType::Q8_0, 64), "m"), GgmlType::Q8_0);
  EXPECT_EQ(q4.type_for(tensor("blk.0.attn_k.weight", GgmlType::Q8_0, 2880), "m"), GgmlType::Q4_0);
  // Other tensors keep their type.
  EXPECT_EQ(q8.type_for(tensor("blk.0.ffn_gate_inp.weight", GgmlType::F32, 2880), "m"), GgmlType::F32);
  // A role named at a higher precision than it has, or quantized otherwise.
  EXPECT_NE(error_of([&] { q8.type_for(tensor("blk.1.ffn_up_exps.weight", GgmlType::MXFP4, 2880), "m.gguf"); })
                .find("--quantize experts=q8_0: blk.1.ffn_up_exps.weight in m.gguf is MXFP4, already at this "
                      "precision or lower"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              q4.type_for(tensor("blk.0.attn_v.weight", GgmlType::Q6_K, 2880), "m");
            }).find("quantized to another type than Q8_0"),
            std::string::npos);
  // Rows that are not whole blocks of the target.
  EXPECT_NE(error_of([&] {
              q4.type_for(tensor("blk.0.ffn_down_exps.weight", GgmlType::BF16, 2880), "m");
            }).find("has rows of 2880 values, not a whole number of Q4_K's 256-value blocks"),
            std::string::npos);
  // A preset leaves what is already lower as it is.
  const QuantizePlan int8 = parse_quantize("int8");
  EXPECT_EQ(int8.type_for(tensor("blk.1.ffn_up_exps.weight", GgmlType::MXFP4, 2880), "m"), GgmlType::MXFP4);
}

// Rows [r0, r1), columns [c0, c1) of a file tensor (rows counted across
// its experts), converted by the plain reference and, if packed, packed as
// load_shard keeps a matrix of `to`.
std::vector<uint8_t> expected_matrix(const TensorView& t, int64_t r0, int64_t r1, int64_t c0, int64_t c1, GgmlType to,
                                     bool packed) {
  const int64_t cols = c1 - c0, rows = r1 - r0;
  const uint64_t row = row_bytes(to, cols);
  std::vector<uint8_t> file_layout(rows * row);
  std::vector<float> values(cols);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t.type, t.data + (r0 + r) * t.row_bytes + row_bytes(t.type, c0), values.data(), cols);
    quantize_row(to, values.data(), file_layout.data() + r * row, cols);
  }
  if (!packed) return file_layout;
  std::vector<uint8_t> out(rows * packed_row_bytes(to, cols));
  pack_rows(to, file_layout.data(), row, out.data(), rows, cols);
  return out;
}

void expect_bytes(const Matrix& m, const std::vector<uint8_t>& expected, const char* what) {
  ASSERT_NE(m.data, nullptr) << what;
  EXPECT_EQ(std::memcmp(m.data, expected.data(), expected.size()), 0) << what;
}

// A 16-bit tiny model loaded as rank 1 of 2 (tensor split: a slice of rows,
// of columns and of each expert) with every role converted. Its width is
// 96, so that an expert's packed MXFP4 rows (32 rows of 3 blocks: 1632
// bytes) are not a whole number of 64-byte lines: the experts must follow
// one another with no gap, as slices of one matrix.
TEST(QuantizePlan, ALoadedShardHoldsThePlainConversion) {
  SyntheticSpec spec = synthetic_preset("tiny");
  spec.config.n_embd = 96;
  set_synthetic_types(spec, "dense=F16,experts=BF16");
  const std::string path = testing::temp_path("f16.gguf");
  write_synthetic_model(spec, testing::test_vocab(), path, nullptr);
  const GgufFile file = GgufFile::open(path);
  std::filesystem::remove(path);  // the mapping keeps it while the test reads it
  const ModelConfig c = read_model_config(file);
  const QuantizePlan plan = parse_quantize("attn=q4_0,experts=mxfp4,embed=q8_0,output=q5_0");
  const Shard shard = plan_shard(model_shape(file, c, plan), SplitMode::tensor, 1, 2);
  ThreadPool pool(2);
  const RankWeights w = load_shard(file, c, shard, plan, pool);
  const RankShare& x = shard.share;
  // The output head, placed last, ends where the sizing said, before the
  // bytes the kernels may read past a matrix.
  const Matrix& head = w.views.output;
  EXPECT_EQ(head.data + head.rows * head.row_bytes, w.memory.data() + w.memory.size() - kPackedOverread);

  const int64_t group = c.n_head / c.n_head_kv, hd = c.head_dim;
  const int64_t q0 = x.kv_heads.begin * group * hd, q1 = x.kv_heads.end * group * hd;
  const LayerWeights& L = w.views.layers[1];
  EXPECT_EQ(L.wq.type, GgmlType::Q4_0);
  expect_bytes(L.wq, expected_matrix(file.tensor("blk.1.attn_q.weight"), q0, q1, 0, c.n_embd, GgmlType::Q4_0, true),
               "attn_q rows");
  expect_bytes(L.wo,
               expected_matrix(file.tensor("blk.1.attn_output.weight"), 0, c.n_embd, q0, q1, GgmlType::Q4_0, true),
               "attn_output columns");
  // Expert e's slice of features (gate: rows; down: columns), one after
  // another with no gap.
  const int64_t ff = c.n_ff_exp, e = c.n_expert - 1;
  EXPECT_EQ(L.gate.type, GgmlType::MXFP4);
  expect_bytes(L.gate.slice(e * x.ff.size(), x.ff.size()),
               expected_matrix(file.tensor("blk.1.ffn_gate_exps.weight"), e * ff + x.ff.begin, e * ff + x.ff.end, 0,
                               c.n_embd, GgmlType::MXFP4, true),
               "last expert's gate rows");
  expect_bytes(L.down.slice(e * c.n_embd, c.n_embd),
               expected_matrix(file.tensor("blk.1.ffn_down_exps.weight"), e * c.n_embd, (e + 1) * c.n_embd, x.ff.begin,
                               x.ff.end, GgmlType::MXFP4, true),
               "last expert's down columns");
  EXPECT_EQ(w.views.output.type, GgmlType::Q5_0);
  expect_bytes(
      w.views.output,
      expected_matrix(file.tensor("output.weight"), x.vocab.begin, x.vocab.end, 0, c.n_embd, GgmlType::Q5_0, true),
      "output rows");
  // The embeddings: every row, in the file's layout, in the rank's memory.
  const TensorView& embd = file.tensor("token_embd.weight");
  EXPECT_EQ(w.views.embd.type, GgmlType::Q8_0);
  EXPECT_NE(w.views.embd.data, embd.data);
  expect_bytes(w.views.embd, expected_matrix(embd, 0, embd.rows(), 0, c.n_embd, GgmlType::Q8_0, false), "embeddings");
  // Vectors are copied as they are.
  EXPECT_EQ(std::memcmp(L.attn_norm, file.tensor("blk.1.attn_norm.weight").data, c.n_embd * sizeof(float)), 0);
}

}  // namespace
}  // namespace tps
