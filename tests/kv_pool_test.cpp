// The KV pool's attention against plain loops, over blocks scattered in the
// pool as a sequence's block table puts them, and the sliding window's
// boundary.
#include <gtest/gtest.h>

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

// Attention over the pool with the scalar kernels gives the plain loops'
// bits: scores summed over the dimensions in order, values over the
// positions in order; every other instruction set the same within
// rounding. For each of the query heads of a kv head (5: the vector
// kernels' 4 at once and one more), head sizes with and without partial
// vectors, blocks out of order in the pool, a window whose table starts past
// block 0, runs that start and end inside key blocks, and more positions
// than one pass of values.
TEST(KvPool, AttentionIsThePlainLoop) {
  for (int hd : {64, 24, 12}) {
    const int kv_heads = 3, heads = 5, width = kv_heads * hd, window = 21;
    const OneLayer layer(kv_heads, hd, true);
    KvPool pool(layer.config, layer.shard, 0, 8);
    ASSERT_EQ(pool.blocks(true), 8);
    EXPECT_EQ(KvPool::block_bytes(layer.config, layer.shard, true), 2u * kKvBlock * width * sizeof(float));
    const std::vector<int32_t> table = {6, 2, 7, 0, 4};  // block numbers 0..4 (positions 0..79)
    std::mt19937 rng(hd);
    std::normal_distribution<float> normal;
    std::vector<std::vector<float>> keys, values;
    std::vector<float> q(heads * hd), scores(heads * window), out(heads * hd), sinks(heads);
    for (int pos = 0; pos < 80; ++pos) {
      keys.emplace_back(width), values.emplace_back(width);
      for (float& x : keys.back()) x = normal(rng);
      for (float& x : values.back()) x = normal(rng);
      pool.store(0, table[pos / kKvBlock], pos % kKvBlock, keys.back().data(), values.back().data());
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
        pool.attend(kernel_set(isa), 0, std::span<const int32_t>(table).subspan(b0), b0, q.data(), heads, g, first, pos,
                    scale, sinks.data(), scores.data(), out.data());
        for (int i = 0; i < heads * hd; ++i) {
          if (isa == Isa::scalar)
            ASSERT_EQ(out[i], want[i]) << "head_dim " << hd << " position " << pos << " head " << i / hd << " dim "
                                       << i % hd;
          else
            ASSERT_NEAR(out[i], want[i], 2e-6f) << isa_name(isa) << " head_dim " << hd << " position " << pos
                                                << " head " << i / hd << " dim " << i % hd;
        }
      }
    }
  }
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
