// How ranks share a model (topology/model_shape.h): layer ranges, and every
// split covering every part exactly once.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/error.h"
#include "topology/model_shape.h"

namespace tps {
namespace {

// gpt-oss-20b's proportions (spec §7.1), in bytes.
ModelShape shape_20b() {
  ModelShape s;
  s.layer_bytes.assign(24, 0);
  s.input_bytes = 615329280;
  s.output_bytes = 615329280 + 2880 * 4;
  s.kv_heads = 8, s.experts = 32, s.ff = 2880, s.vocab = 201088;
  s.attention_bytes = 24ull * (2 * 12533760 + 2 * 1566720);
  s.expert_bytes = 24ull * 3 * 141004800;
  s.replicated_bytes = 24ull * (2 * 2880 * 4 + 368640);
  for (int l = 0; l < 24; ++l) s.layer_bytes[l] = (s.attention_bytes + s.expert_bytes + s.replicated_bytes) / 24;
  return s;
}

TEST(SplitLayers, BalancedContiguousRanges) {
  ModelShape s;
  s.layer_bytes.assign(24, 100);
  s.input_bytes = 200;
  s.output_bytes = 200;
  for (int ranks = 1; ranks <= 24; ++ranks) {
    std::vector<LayerRange> r = split_layers(s, ranks);
    ASSERT_EQ(static_cast<int>(r.size()), ranks);
    uint64_t total = 0, most = 0;
    for (int i = 0; i < ranks; ++i) {
      EXPECT_EQ(r[i].begin, i == 0 ? 0 : r[i - 1].end);
      EXPECT_GT(r[i].end, r[i].begin) << "rank " << i << " of " << ranks << " has no layer";
      total += r[i].bytes;
      most = std::max(most, r[i].bytes);
    }
    EXPECT_EQ(r.back().end, 24);
    EXPECT_EQ(total, s.total());
    // No rank holds more than its share plus one layer and the embeddings.
    EXPECT_LE(most, s.total() / ranks + 100 + 200) << ranks << " ranks";
  }
  std::vector<LayerRange> two = split_layers(s, 2);
  EXPECT_EQ(two[0].end, 12);
  EXPECT_EQ(two[0].bytes, 1400u);
  EXPECT_THROW(split_layers(s, 0), InputError);
  // More ranks than layers: one layer each, then none; the head stays last.
  std::vector<LayerRange> many = split_layers(s, 26);
  for (int i = 0; i < 26; ++i) EXPECT_EQ(many[i].end - many[i].begin, i < 24 ? 1 : 0) << i;
  EXPECT_EQ(many[25].bytes, 200u);
  // Balanced by what a token reads when the shape says: gpt-oss-20b's output
  // head reads about as much as 7 blocks, so the last stage gets fewer.
  s.layer_read_bytes.assign(24, 100);
  s.input_read_bytes = 1;
  s.output_read_bytes = 700;
  std::vector<LayerRange> reads = split_layers(s, 2);
  EXPECT_EQ(reads[0].end, 15);
  EXPECT_EQ(reads[1].bytes, 9 * 100u + 200);  // bytes held: its blocks and the head
}

// What a decoded token reads, split: every rank reads the norms, routers
// and one embedding row; the rest is cut, so the shares add up to one
// token's reads plus those copies. A pipeline's stages add up exactly.
TEST(PlanSplit, ReadBytesAddUpToAToken) {
  ModelShape s = shape_20b();
  s.input_read_bytes = 2880 * 34 / 32;  // one Q8_0 row
  s.output_read_bytes = s.output_bytes;
  s.layer_read_bytes.assign(24, (s.attention_bytes + s.replicated_bytes + s.expert_bytes * 4 / 32) / 24);
  uint64_t token = s.input_read_bytes + s.output_read_bytes;
  for (uint64_t b : s.layer_read_bytes) token += b;
  for (SplitMode mode : {SplitMode::layers, SplitMode::experts, SplitMode::tensor}) {
    for (int ranks : {1, 2, 4, 8}) {
      uint64_t sum = 0;
      for (const RankShare& x : plan_split(s, mode, ranks)) sum += x.read_bytes;
      const uint64_t copies = mode == SplitMode::layers ? 0 : (ranks - 1) * (s.input_read_bytes + s.replicated_bytes);
      EXPECT_NEAR(double(sum), double(token + copies), 1e-6 * double(token)) << split_mode_name(mode) << " x" << ranks;
    }
  }
  // Two tensor ranks read about half a token each.
  const std::vector<RankShare> two = plan_split(s, SplitMode::tensor, 2);
  EXPECT_NEAR(double(two[0].read_bytes), double(token) / 2, 0.02 * double(token));
}

TEST(PlanSplit, SharesCoverEverythingOnce) {
  ModelShape s = shape_20b();
  for (SplitMode mode : {SplitMode::experts, SplitMode::tensor}) {
    for (int ranks = 1; ranks <= 12; ++ranks) {
      std::vector<RankShare> p = plan_split(s, mode, ranks);
      int64_t kv = 0, vocab = 0, experts = 0, ff = 0;
      for (int r = 0; r < ranks; ++r) {
        EXPECT_EQ(p[r].vocab.begin, r ? p[r - 1].vocab.end : 0);
        vocab += p[r].vocab.size();
        kv += p[r].kv_heads.size();
        // Up to 8 ranks (the KV heads) every rank has some of everything.
        if (ranks <= 8) {
          EXPECT_TRUE(idle_parts(p[r], mode).empty()) << ranks << " ranks, rank " << r;
        }
        if (mode == SplitMode::experts) {
          EXPECT_GE(p[r].experts.size(), 1);
          experts += p[r].experts.size();
          EXPECT_EQ(p[r].ff.size(), 2880);
        } else {
          EXPECT_EQ(p[r].ff.begin % 32, 0);  // whole MXFP4 blocks
          EXPECT_EQ(p[r].ff.end % 32, 0);
          EXPECT_GE(p[r].ff.size(), 32);
          ff += p[r].ff.size();
        }
      }
      EXPECT_EQ(kv, 8);
      EXPECT_EQ(vocab, 201088);
      EXPECT_EQ(mode == SplitMode::experts ? experts : ff, mode == SplitMode::experts ? 32 : 2880);
    }
  }
  // Two ranks in tensor mode hold about half each, plus the embeddings each.
  std::vector<RankShare> two = plan_split(s, SplitMode::tensor, 2);
  const uint64_t half = (s.total() - s.input_bytes - s.replicated_bytes) / 2;
  EXPECT_NEAR(double(two[0].bytes), double(half + s.input_bytes + s.replicated_bytes), 0.01 * double(half));
  EXPECT_EQ(plan_split(s, SplitMode::tensor, 90).back().ff.size(), 32);
  // Vocabulary rows go in chunks of kVocabGranule; the last chunk is short.
  for (const RankShare& x : plan_split(s, SplitMode::tensor, 3)) EXPECT_EQ(x.vocab.begin % kVocabGranule, 0);
  // More ranks than experts or feature blocks: the extra ranks hold none of
  // them and say so.
  std::vector<RankShare> many = plan_split(s, SplitMode::experts, 33);
  EXPECT_EQ(many[0].experts.size(), 0);
  EXPECT_EQ(idle_parts(many[0], SplitMode::experts), (std::vector<std::string>{"attention heads", "experts"}));
  EXPECT_EQ(plan_split(s, SplitMode::tensor, 91)[0].ff.size(), 0);
  EXPECT_THROW(plan_split(s, SplitMode::tensor, 0), InputError);
  // Layers mode: every head and expert of the rank's layers; the output head
  // on the last rank.
  std::vector<RankShare> pipe = plan_split(s, SplitMode::layers, 2);
  EXPECT_EQ(pipe[0].vocab.size(), 0);
  EXPECT_EQ(pipe[1].vocab.size(), 201088);
  EXPECT_EQ(pipe[0].ff.size(), 2880);
  EXPECT_THROW(parse_split_mode("rows"), InputError);
  EXPECT_EQ(parse_split_mode("tensor"), SplitMode::tensor);
}

}  // namespace
}  // namespace tps
