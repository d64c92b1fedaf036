// The pieces of the forward pass alone, against hand-computed values:
// YaRN RoPE (spec §2.4, §7.4), RMSNorm, the sink softmax, the cached
// attention against plain loops, the sliding window boundary, expert
// selection with ties, the SwiGLU clamp, and the sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/layer_math.h"
#include "engine/rope.h"
#include "engine/sampler.h"
#include "engine/synthetic_model.h"
#include "runtime/error.h"

namespace tps {
namespace {

ModelConfig gpt_oss_20b() { return synthetic_preset("20b").config; }

TEST(Rope, YarnFrequenciesMatchTheSpecTable) {
  RopeTable openai = make_yarn_rope(gpt_oss_20b(), false);
  RopeTable ggml = make_yarn_rope(gpt_oss_20b(), true);
  EXPECT_NEAR(openai.corr_low, 8.0927791155, 1e-9);
  EXPECT_NEAR(openai.corr_high, 17.3980245016, 1e-9);
  EXPECT_EQ(ggml.corr_low, 8);
  EXPECT_EQ(ggml.corr_high, 18);
  EXPECT_NEAR(openai.mscale, 1.3465735903, 1e-9);
  // Spec §7.4: identical outside the ramp, different inside it.
  EXPECT_DOUBLE_EQ(openai.inv_freq[0], 1.0);
  EXPECT_NEAR(openai.inv_freq[1], 0.6890443059, 1e-9);
  EXPECT_NEAR(openai.inv_freq[8], 0.05081327482, 1e-11);
  EXPECT_NEAR(openai.inv_freq[18], 3.830881237e-05, 1e-14);
  EXPECT_NEAR(openai.inv_freq[31], 3.023511428e-07, 1e-16);
  const std::map<int, std::pair<double, double>> ramp = {
      {9, {3.170569618e-02, 3.162075228e-02}},  {12, {6.794959490e-03, 7.015713911e-03}},
      {15, {1.052602101e-03, 1.206130969e-03}}, {17, {1.293187012e-04, 2.279477958e-04}}};
  for (auto [i, want] : ramp) {
    EXPECT_NEAR(openai.inv_freq[i], want.first, want.first * 1e-8) << i;
    EXPECT_NEAR(ggml.inv_freq[i], want.second, want.second * 1e-8) << i;
  }
}

TEST(Rope, RotatesHalvesByPositionAndScales) {
  RopeTable t = make_yarn_rope(gpt_oss_20b(), false);
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f;   // pairs with x[32]
  x[33] = 1.0f;  // pairs with x[1]
  apply_rope(t, x.data(), 1, 3);
  const double m = t.mscale;
  EXPECT_NEAR(x[0], m * std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[32], m * std::sin(3.0), 1e-6);
  const double th = 3 * t.inv_freq[1];
  EXPECT_NEAR(x[1], -m * std::sin(th), 1e-6);
  EXPECT_NEAR(x[33], m * std::cos(th), 1e-6);
  // Position 0: only the magnitude factor.
  std::vector<float> y(64, 2.0f);
  apply_rope(t, y.data(), 1, 0);
  for (float v : y) EXPECT_NEAR(v, 2 * m, 1e-6);
}

TEST(LayerMath, RmsNorm) {
  const float x[4] = {1, 2, 3, 4}, g[4] = {1, 1, 2, 0.5f};
  float out[4];
  rmsnorm(x, g, 0.0f, 4, out);
  const float inv = 1.0f / std::sqrt(7.5f);  // mean of squares = 30 / 4
  EXPECT_NEAR(out[0], inv, 1e-6);
  EXPECT_NEAR(out[2], 6 * inv, 1e-6);
  EXPECT_NEAR(out[3], 2 * inv, 1e-6);
}

TEST(LayerMath, SinkTakesItsShareOfTheSoftmax) {
  std::vector<float> z = {0.0f, 0.0f};
  softmax_with_sink(z, 0.0f);  // three equal logits, one of them the sink
  EXPECT_NEAR(z[0], 1.0f / 3, 1e-7);
  EXPECT_NEAR(z[1], 1.0f / 3, 1e-7);
  std::vector<float> w = {1.0f, 2.0f};
  softmax_with_sink(w, -1e9f);  // a hopeless sink leaves a plain softmax
  EXPECT_NEAR(w[0] + w[1], 1.0f, 1e-6);
  EXPECT_NEAR(w[1] / w[0], std::exp(1.0f), 1e-5);
  std::vector<float> big = {1000.0f};
  softmax_with_sink(big, 1000.0f);  // no overflow: half to the sink
  EXPECT_NEAR(big[0], 0.5f, 1e-7);
}

// The blocked cache with the scalar kernels gives the plain loops' bits:
// scores summed over the dimensions in order, values over the positions in
// order; every other instruction set the same within rounding. For each of
// the query heads of a kv head (5: the vector kernels' 4 at once and one
// more), head sizes with and without partial vectors, windows across the
// ring's wrap, runs that start and end inside key blocks, and more
// positions than one pass of values.
TEST(LayerMath, CachedAttentionIsThePlainLoop) {
  for (int hd : {64, 24, 12}) {
    const int kv_heads = 3, heads = 5, width = kv_heads * hd, window = 21;
    LayerCache cache(window, kv_heads, hd);  // 21 rounds up to 32 slots
    ASSERT_EQ(cache.slots(), 32);
    std::mt19937 rng(hd);
    std::normal_distribution<float> normal;
    std::vector<std::vector<float>> keys, values;
    std::vector<float> q(heads * hd), scores(heads * window), out(heads * hd), sinks(heads);
    for (int pos = 0; pos < 80; ++pos) {
      keys.emplace_back(width), values.emplace_back(width);
      for (float& x : keys.back()) x = normal(rng);
      for (float& x : values.back()) x = normal(rng);
      cache.store(pos, keys.back().data(), values.back().data());
      for (float& x : q) x = normal(rng);
      for (float& x : sinks) x = normal(rng);
      const int g = pos % kv_heads, first = first_visible(pos, window, true);
      const float scale = 0.125f;
      std::vector<float> want(heads * hd);
      for (int h = 0; h < heads; ++h) {
        std::vector<float> z;
        for (int s = first; s <= pos; ++s) {
          float dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[h * hd + i] * keys[s][g * hd + i];
          z.push_back(dot * scale);
        }
        softmax_with_sink(z, sinks[h]);
        for (int i = 0; i < hd; ++i)
          for (int s = first; s <= pos; ++s) want[h * hd + i] += z[s - first] * values[s][g * hd + i];
      }
      for (Isa isa : supported_isas()) {
        cache.attend(kernel_set(isa), q.data(), heads, g, first, pos, scale, sinks.data(), scores.data(), out.data());
        for (int i = 0; i < heads * hd; ++i) {
          if (isa == Isa::scalar)
            ASSERT_EQ(out[i], want[i]) << "head_dim " << hd << " position " << pos << " head " << i / hd
                                       << " dim " << i % hd;
          else
            ASSERT_NEAR(out[i], want[i], 2e-6f) << isa_name(isa) << " head_dim " << hd << " position " << pos
                                                << " head " << i / hd << " dim " << i % hd;
        }
      }
    }
  }
}

TEST(LayerMath, SlidingWindowBoundary) {
  // Window 128: position 127 still sees position 0; position 128 does not.
  EXPECT_EQ(first_visible(127, 128, true), 0);
  EXPECT_EQ(first_visible(128, 128, true), 1);
  EXPECT_EQ(first_visible(300, 128, true), 173);  // 128 keys: 173..300
  EXPECT_EQ(first_visible(300, 128, false), 0);
  EXPECT_EQ(first_visible(0, 1, true), 0);
}

TEST(LayerMath, ExpertSelectionAndTies) {
  const std::vector<float> r = {0.5f, 2.0f, 1.0f, 2.0f, -1.0f};
  int experts[2];
  float weights[2];
  select_experts(r, 2, experts, weights);
  EXPECT_EQ(experts[0], 1);  // tie between 1 and 3: the lower index first
  EXPECT_EQ(experts[1], 3);
  EXPECT_FLOAT_EQ(weights[0], 0.5f);
  int e3[3];
  float w3[3];
  select_experts(r, 3, e3, w3);
  EXPECT_EQ(e3[2], 2);
  // Softmax over the chosen logits only: 2, 2, 1.
  const float denom = 2 * std::exp(0.0f) + std::exp(-1.0f);
  EXPECT_NEAR(w3[2], std::exp(-1.0f) / denom, 1e-6);
}

TEST(LayerMath, SwigluClamp) {
  const float a = 1.702f, limit = 7.0f;
  auto plain = [&](float g, float u) { return g / (1 + std::exp(-a * g)) * (u + 1); };
  EXPECT_NEAR(swiglu_oai(1.0f, 0.5f, a, limit), plain(1.0f, 0.5f), 1e-6);
  // The gate is clamped above only; the up branch both ways.
  EXPECT_NEAR(swiglu_oai(9.0f, 0.0f, a, limit), plain(7.0f, 0.0f), 1e-5);
  EXPECT_NEAR(swiglu_oai(-9.0f, 0.0f, a, limit), plain(-9.0f, 0.0f), 1e-6);
  EXPECT_NEAR(swiglu_oai(1.0f, 20.0f, a, limit), plain(1.0f, 7.0f), 1e-5);
  EXPECT_NEAR(swiglu_oai(1.0f, -20.0f, a, limit), plain(1.0f, -7.0f), 1e-5);
}

TEST(Sampler, GreedyFiltersAndSeeds) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -5.0f};
  EXPECT_EQ(argmax(logits), 1);  // ties: lowest id
  Sampler greedy({0.0f, 0, 1.0f, 0.0f, 1});
  EXPECT_EQ(greedy.sample(logits), 1);
  // top-k 2 keeps ids 1 and 3 only.
  Sampler topk({1.0f, 2, 1.0f, 0.0f, 5});
  for (int i = 0; i < 200; ++i) {
    int id = topk.sample(logits);
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
  // min-p 0.5 drops what is less than half as likely as the best: keeps 1, 3.
  Sampler minp({1.0f, 0, 1.0f, 0.5f, 5});
  for (int i = 0; i < 200; ++i) EXPECT_NE(minp.sample(logits), 2);
  // top-p small enough keeps only the single most likely token.
  Sampler topp({1.0f, 0, 0.01f, 0.0f, 5});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(topp.sample(logits), 1);
  // The same seed draws the same sequence; the draws follow the distribution.
  Sampler a({1.0f, 0, 1.0f, 0.0f, 42}), b({1.0f, 0, 1.0f, 0.0f, 42});
  std::map<int, int> counts;
  for (int i = 0; i < 20000; ++i) {
    int id = a.sample(logits);
    EXPECT_EQ(id, b.sample(logits));
    ++counts[id];
  }
  double z = 0;
  for (float l : logits) z += std::exp(l);
  EXPECT_NEAR(counts[2] / 20000.0, std::exp(2.0) / z, 0.02);
  EXPECT_THROW(Sampler({-0.5f, 0, 1.0f, 0.0f, 0}), InputError);
  EXPECT_THROW(Sampler({1.0f, 0, 0.0f, 0.0f, 0}), InputError);
  EXPECT_THROW(Sampler({1.0f, -1, 1.0f, 0.0f, 0}), InputError);
}

TEST(Sampler, TopLogprobs) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  auto top = top_logprobs(logits, 5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_NEAR(top[0].logprob, std::log(0.75f), 1e-6);
  EXPECT_NEAR(logprob_of(logits, 0), std::log(0.25f), 1e-6);
}

}  // namespace
}  // namespace tps
