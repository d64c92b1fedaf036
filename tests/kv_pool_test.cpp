// The KV pool's attention against plain loops, over blocks scattered in the
// pool as a sequence's block table puts them, and the sliding window's
// boundary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/layer_math.h"
#include "engine/step/kv_pool.h"

namespace tps {
namespace {

// One layer of kv_heads heads of hd dimensions, sliding (swa_pattern 0: every
// layer slides) or not, and the shard that holds all of it.
struct OneLayer {
  ModelConfig config;
  Shard shard;
  OneLayer(int kv_heads, int hd, bool sliding) {
    config.n_layer = 1, config.n_head_kv = kv_heads, config.head_dim = hd;
    config.swa_pattern = sliding ? 0 : 1;
    shard.share.layers = {0, 1}, shard.share.kv_heads = {0, kv_heads};
  }
};

// A row of values as a cache of `type` keeps them, derived from
// kernels/kv_format.h's description rather than its code: 16-bit floats
// rounded to nearest even; q8_0 in blocks of 32, scale max|x| / 127 kept as
// f16, codes round(x / scale) with the unrounded scale.
std::vector<float> as_stored(KvType type, std::vector<float> x) {
  for (size_t b = 0; b < x.size(); b += 32) {
    const size_t end = std::min(x.size(), b + 32);
    float amax = 0;
    for (size_t i = b; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (size_t i = b; i < end; ++i) switch (type) {
        case KvType::f32: break;
        case KvType::f16: x[i] = fp16_to_fp32(fp32_to_fp16(x[i])); break;
        case KvType::bf16: x[i] = bf16_to_fp32(fp32_to_bf16(x[i])); break;
        case KvType::q8_0: x[i] = fp16_to_fp32(fp32_to_fp16(amax / 127)) * std::nearbyint(x[i] / (amax / 127)); break;
      }
  }
  return x;
}

// Attention over the pool with the scalar kernels gives the plain loops'
// bits over the keys and values as the pool's type keeps them: scores
// summed over the dimensions in order, values over the positions in order;
// every other instruction set the same within rounding. For each type; for
// each of the query heads of a kv head (5: the vector kernels' 4 at once
// and one more), head sizes with and without partial vectors (and, for
// q8_0, a short last block of 32), blocks out of order in the pool, a
// window whose table starts past block 0, runs that start and end inside
// key blocks, and more positions than one pass of values.
TEST(KvPool, AttentionIsThePlainLoop) {
  for (int t = 0; t < kKvTypeCount; ++t)
    for (int hd : {64, 24, 12, 72}) {
      const KvType type = static_cast<KvType>(t);
      const int kv_heads = 3, heads = 5, width = kv_heads * hd, window = 21;
      const OneLayer layer(kv_heads, hd, true);
      KvPool pool(layer.config, layer.shard, type, 0, 8);
      ASSERT_EQ(pool.blocks(true), 8);
      EXPECT_EQ(KvPool::block_bytes(layer.config, layer.shard, type, true),
                kv_heads * (kv_key_block_bytes(type, hd) + kKvBlock * kv_value_bytes(type, hd)));
      const std::vector<int32_t> table = {6, 2, 7, 0, 4};  // block numbers 0..4 (positions 0..79)
      std::mt19937 rng(hd);
      std::normal_distribution<float> normal;
      std::vector<std::vector<float>> keys, values;  // as stored, by kv head
      std::vector<float> q(heads * hd), scores(heads * window), out(heads * hd), sinks(heads);
      for (int pos = 0; pos < 80; ++pos) {
        std::vector<float> k(width), v(width);
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        pool.store(0, table[pos / kKvBlock], pos % kKvBlock, k.data(), v.data());
        keys.emplace_back(), values.emplace_back();
        for (int g = 0; g < kv_heads; ++g) {
          const std::vector<float> kg = as_stored(type, {k.begin() + g * hd, k.begin() + (g + 1) * hd}),
                                   vg = as_stored(type, {v.begin() + g * hd, v.begin() + (g + 1) * hd});
          keys.back().insert(keys.back().end(), kg.begin(), kg.end());
          values.back().insert(values.back().end(), vg.begin(), vg.end());
        }
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
          const int b0 = first / kKvBlock;
          pool.attend(kernel_set(isa), 0, std::span<const int32_t>(table).subspan(b0), b0, q.data(), heads, g, first,
                      pos, scale, sinks.data(), scores.data(), out.data());
          for (int i = 0; i < heads * hd; ++i) {
            if (isa == Isa::scalar)
              ASSERT_EQ(out[i], want[i]) << kv_type_name(type) << " head_dim " << hd << " position " << pos << " head "
                                         << i / hd << " dim " << i % hd;
            else
              ASSERT_NEAR(out[i], want[i], 2e-6f) << isa_name(isa) << " " << kv_type_name(type) << " head_dim " << hd
                                                  << " position " << pos << " head " << i / hd << " dim " << i % hd;
          }
        }
      }
    }
}

// What a position costs in each type: f32 4 bytes a value, f16 and bf16 2,
// q8_0 34 per 32 (and a whole scale for a short last block).
TEST(KvPool, BytesOfEachType) {
  EXPECT_EQ(kv_value_bytes(KvType::f32, 64), 256u);
  EXPECT_EQ(kv_value_bytes(KvType::f16, 64), 128u);
  EXPECT_EQ(kv_value_bytes(KvType::bf16, 64), 128u);
  EXPECT_EQ(kv_value_bytes(KvType::q8_0, 64), 68u);
  EXPECT_EQ(kv_value_bytes(KvType::q8_0, 72), 78u);
  EXPECT_EQ(kv_key_block_bytes(KvType::q8_0, 64), 16u * 68);
  EXPECT_EQ(kv_key_block_bytes(KvType::f16, 64), 16u * 128);
  for (const char* name : {"f32", "F16", "bf16", "Q8_0"}) EXPECT_TRUE(parse_kv_type(name)) << name;
  for (const char* name : {"", "q8", "f64", "q4_0", "f16 "}) EXPECT_FALSE(parse_kv_type(name)) << name;
}

// A key or value past what the type keeps (f16's 65504, q8_0's scale past
// f16's, bf16's largest finite; an infinity too) is stored as that limit,
// never as inf, and the pool says so once.
TEST(KvPool, ValuesBeyondTheCacheTypeAreClampedWithOneWarning) {
  const int hd = 40;  // q8_0: a block of 32 and a short one
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
    const float limit = kv_type_limit(type);
    std::vector<float> x(hd, 0.5f);
    x[3] = 1e5f, x[7] = -1e9f, x[33] = 3.4e38f, x[39] = -INFINITY;
    std::vector<uint8_t> keys(kv_key_block_bytes(type, hd)), values(kv_value_bytes(type, hd));
    const int beyond =
        static_cast<int>(std::count_if(x.begin(), x.end(), [&](float e) { return std::fabs(e) > limit; }));
    EXPECT_EQ(beyond, type == KvType::f16 ? 4 : type == KvType::q8_0 ? 3 : 2);
    EXPECT_EQ(store_keys(type, keys.data(), hd, 5, x.data()), beyond) << kv_type_name(type);
    EXPECT_EQ(store_values(type, values.data(), hd, x.data()), beyond) << kv_type_name(type);
    for (int i = 0; i < hd; ++i) {
      const float k = key_at(type, keys.data(), hd, i, 5), v = value_at(type, values.data(), hd, i);
      ASSERT_TRUE(std::isfinite(k) && std::isfinite(v)) << kv_type_name(type) << " element " << i;
      if (std::fabs(x[i]) > limit) {  // the type's limit, as it keeps it
        EXPECT_NEAR(k, std::copysign(limit, x[i]), limit * 1e-3) << kv_type_name(type) << " element " << i;
        EXPECT_NEAR(v, std::copysign(limit, x[i]), limit * 1e-3) << kv_type_name(type) << " element " << i;
      }
    }
  }
  EXPECT_EQ(kv_type_limit(KvType::f16), 65504.0f);
  // The pool: attention over clamped keys and values is finite; one warning.
  const OneLayer layer(1, hd, false);
  KvPool pool(layer.config, layer.shard, KvType::f16, 1, 0);
  std::vector<float> k(hd, 1.0f), v(hd, 2e5f);
  ::testing::internal::CaptureStderr();
  pool.store(0, 0, 0, k.data(), v.data());
  pool.store(0, 0, 1, v.data(), k.data());
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  EXPECT_NE(said.find("warning: KV cache f16: 40 key or value element(s) of layer 0 beyond what it keeps (+-65504)"),
            std::string::npos)
      << said;
  std::vector<float> q(hd, 1.0f), scores(2), out(hd);
  const float sink = 0;
  const std::vector<int32_t> table = {0};
  pool.attend(kernel_set(Isa::scalar), 0, table, 0, q.data(), 1, 0, 0, 1, 0.125f, &sink, scores.data(), out.data());
  for (float o : out) EXPECT_TRUE(std::isfinite(o)) << o;
}

TEST(KvPool, SlidingWindowBoundary) {
  // Window 128: position 127 still sees position 0; position 128 does not.
  EXPECT_EQ(first_visible(127, 128, true), 0);
  EXPECT_EQ(first_visible(128, 128, true), 1);
  EXPECT_EQ(first_visible(300, 128, true), 173);  // 128 keys: 173..300
  EXPECT_EQ(first_visible(300, 128, false), 0);
  EXPECT_EQ(first_visible(0, 1, true), 0);
}

}  // namespace
}  // namespace tps
