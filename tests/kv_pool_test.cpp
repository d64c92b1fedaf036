// The KV pool's attention against plain loops, over blocks scattered in the
// pool as a sequence's block table puts them, and the sliding window's
// boundary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "engine/cache/kv_pool.h"
#include "engine/kernels/kernel_set.h"
#include "engine/kernels/layer_math.h"
#include "runtime/thread_pool.h"

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
// f16, codes round(x x (1 / scale)) with the unrounded scale (not x / scale:
// the two round a code apart now and then, seen past 500 positions); q4_0
// in blocks of 32, scale (the value of largest magnitude) / -8 kept as f16,
// codes round(x x (1 / scale)) + 8 within 0..15, value scale x (code - 8).
std::vector<float> as_stored(KvType type, std::vector<float> x) {
  for (size_t b = 0; b < x.size(); b += 32) {
    const size_t end = std::min(x.size(), b + 32);
    float amax = 0, extreme = 0;
    for (size_t i = b; i < end; ++i)
      if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), extreme = x[i];
    const float d4 = extreme / -8;
    for (size_t i = b; i < end; ++i) switch (type) {
        case KvType::f32: break;
        case KvType::f16: x[i] = fp16_to_fp32(fp32_to_fp16(x[i])); break;
        case KvType::bf16: x[i] = bf16_to_fp32(fp32_to_bf16(x[i])); break;
        case KvType::q8_0:
          x[i] = fp16_to_fp32(fp32_to_fp16(amax / 127)) * std::nearbyint(x[i] * (1 / (amax / 127)));
          break;
        case KvType::q4_0:
          x[i] = fp16_to_fp32(fp32_to_fp16(d4)) * (std::clamp(std::nearbyint(x[i] * (1 / d4)), -8.0f, 7.0f));
          break;
      }
  }
  return x;
}

// A query as quantized keys score it, derived from kernels/kv_format.h's
// description: by blocks of 32 dimensions of each head, scale max|x| / 127
// as a float, value scale x round(x x (1 / scale)).
std::vector<float> as_scored(KvType type, std::vector<float> q, int hd) {
  if (!kv_quantized(type)) return q;
  for (size_t h = 0; h < q.size(); h += hd)
    for (size_t b = h; b < h + hd; b += 32) {
      const size_t end = std::min(h + hd, b + 32);
      float amax = 0;
      for (size_t i = b; i < end; ++i) amax = std::max(amax, std::fabs(q[i]));
      const float d = amax / 127;
      for (size_t i = b; i < end; ++i) q[i] = d == 0 ? 0 : d * std::nearbyint(q[i] * (1 / d));
    }
  return q;
}

// The attention of heads over positions [first, last] of kv head g of the
// keys and values as stored, by the textbook formula in double.
std::vector<double> textbook_attention(const std::vector<std::vector<float>>& keys,
                                       const std::vector<std::vector<float>>& values, const std::vector<float>& q,
                                       const std::vector<float>& sinks, int heads, int hd, int g, int first, int last,
                                       float scale) {
  std::vector<double> want(heads * hd);
  for (int h = 0; h < heads; ++h) {
    std::vector<double> z;
    double m = sinks[h];
    for (int s = first; s <= last; ++s) {
      double dot = 0;
      for (int i = 0; i < hd; ++i) dot += double{q[h * hd + i]} * keys[s][g * hd + i];
      z.push_back(dot * scale), m = std::max(m, z.back());
    }
    double denom = std::exp(sinks[h] - m);
    for (double& x : z) denom += x = std::exp(x - m);
    for (int i = 0; i < hd; ++i)
      for (int s = first; s <= last; ++s) want[h * hd + i] += z[s - first] / denom * values[s][g * hd + i];
  }
  return want;
}

// Attention over the pool (one pass, an online softmax, chunks of
// kAttentionChunk merged) against the textbook formula in double over the
// keys and values as the pool's type keeps them (and the query as its
// quantized keys score it), within 2e-5 (the scalar
// set) and every vector set within 2e-5 of the scalar set's (seen: under
// 1e-6). For each type; for each of the query heads of a kv head (11: the
// AVX-512 kernels' 8 at once, then 2 and 1; AVX2's 4, 4, 2, 1), head sizes
// with and without
// partial vectors (and, for q8_0 and q4_0, a short last block of 32; for
// q4_0, a short last group of 16 and an odd size), blocks out of
// order in the pool; a sliding window whose table starts past block 0 and
// full attention over more than two chunks, runs that start and end inside
// key blocks and chunks.
void expect_attention(bool sliding) {
  const int positions = sliding ? 80 : 2 * kAttentionChunk + 40, window = 21;
  for (int t = 0; t < kKvTypeCount; ++t)
    for (int hd : {64, 24, 12, 72, 13}) {
      if (!sliding && hd != 64 && hd != 12) continue;  // the long run's time
      const KvType type = static_cast<KvType>(t);
      const int kv_heads = 3, heads = 11, width = kv_heads * hd, blocks = blocks_for(positions);
      const OneLayer layer(kv_heads, hd, sliding);
      KvPool pool(layer.config, layer.shard, type, sliding ? 0 : blocks + 3, sliding ? blocks + 3 : 0);
      EXPECT_EQ(KvPool::block_bytes(layer.config, layer.shard, type, kind_of_layer(sliding)),
                kv_heads * (kv_key_block_bytes(type, hd) + kKvBlock * kv_value_bytes(type, hd)));
      std::vector<int32_t> table(blocks);  // block numbers out of order in the pool
      for (int b = 0; b < blocks; ++b) table[b] = (b * 7 + 3) % (blocks + 3);
      std::mt19937 rng(hd);
      std::normal_distribution<float> normal;
      std::vector<std::vector<float>> keys, values;  // as stored, by kv head
      std::vector<float> q(heads * hd), scratch(2 * attention_state_floats(heads, hd)), out(heads * hd), sinks(heads);
      for (int pos = 0; pos < positions; ++pos) {
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
        if (!sliding && pos % 9 != 0 && pos < positions - 20) continue;  // the long run's time
        for (float& x : q) x = normal(rng);
        for (float& x : sinks) x = normal(rng);
        const int g = pos % kv_heads, first = first_visible(pos, window, sliding);
        const float scale = 0.125f;
        const std::vector<double> want =
            textbook_attention(keys, values, as_scored(type, q, hd), sinks, heads, hd, g, first, pos, scale);
        std::vector<float> scalar(heads * hd);
        for (Isa isa : supported_isas()) {
          const int b0 = first / kKvBlock;
          pool.attend(kernel_set(isa), 0, std::span<const int32_t>(table).subspan(b0), b0, q.data(), heads, g, first,
                      pos, scale, sinks.data(), scratch.data(), out.data());
          if (isa == Isa::scalar) scalar = out;
          for (int i = 0; i < heads * hd; ++i) {
            const double reference = isa == Isa::scalar ? want[i] : scalar[i];
            ASSERT_NEAR(out[i], reference, 2e-5) << isa_name(isa) << " " << kv_type_name(type) << " head_dim " << hd
                                                 << " position " << pos << " head " << i / hd << " dim " << i % hd;
          }
        }
      }
    }
}

TEST(KvPool, SlidingAttentionIsTheTextbookFormula) { expect_attention(true); }
TEST(KvPool, LongAttentionIsTheTextbookFormula) { expect_attention(false); }

// A chunk's state does not depend on which thread computed it or when: the
// chunks of a long run computed on 1..3 threads in any order and merged in
// chunk order give attend's bits, for every instruction set and type.
TEST(KvPool, ChunksOnAnyThreadsGiveTheBitsOfOnePass) {
  const int hd = 64, heads = 8, positions = 3 * kAttentionChunk + 77;
  const OneLayer layer(1, hd, false);
  for (int t = 0; t < kKvTypeCount; ++t) {
    const KvType type = static_cast<KvType>(t);
    KvPool pool(layer.config, layer.shard, type, blocks_for(positions), 0);
    std::vector<int32_t> table(blocks_for(positions));
    std::iota(table.begin(), table.end(), 0);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    std::vector<float> k(hd), v(hd), q(heads * hd), sinks(heads);
    for (int pos = 0; pos < positions; ++pos) {
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      pool.store(0, pos / kKvBlock, pos % kKvBlock, k.data(), v.data());
    }
    for (float& x : q) x = normal(rng);
    for (float& x : sinks) x = normal(rng);
    const int first = 5, last = positions - 1, chunks = attention_chunks(first, last);
    ASSERT_EQ(chunks, 4);
    const int64_t floats = attention_state_floats(heads, hd);
    for (Isa isa : supported_isas()) {
      std::vector<float> scratch(2 * floats), alone(heads * hd);
      pool.attend(kernel_set(isa), 0, table, 0, q.data(), heads, 0, first, last, 0.125f, sinks.data(), scratch.data(),
                  alone.data());
      for (int threads = 1; threads <= 3; ++threads) {
        ThreadPool threads_pool(threads);
        std::vector<float> partials(chunks * floats), running(floats), out(heads * hd);
        threads_pool.run([&](int th, int nt) {
          for (int c = chunks - 1 - th; c >= 0; c -= nt)  // last chunks first
            pool.attend_chunk(kernel_set(isa), 0, table, 0, q.data(), heads, 0, chunk_first(first, c),
                              chunk_last(first, last, c), 0.125f, attention_state(partials.data() + c * floats, heads));
        });
        const AttentionState all = attention_state(running.data(), heads);
        clear_attention_state(all, heads, hd);
        for (int c = 0; c < chunks; ++c)
          merge_attention_state(attention_state(partials.data() + c * floats, heads), all, heads, hd);
        finish_attention(all, sinks.data(), heads, hd, out.data());
        for (int i = 0; i < heads * hd; ++i)
          ASSERT_EQ(out[i], alone[i]) << isa_name(isa) << " " << kv_type_name(type) << " " << threads
                                      << " threads, element " << i;
      }
    }
  }
}

// Chunks cut at multiples of kAttentionChunk from any first position.
TEST(KvPool, ChunksOfARun) {
  EXPECT_EQ(attention_chunks(0, 0), 1);
  EXPECT_EQ(attention_chunks(0, kAttentionChunk - 1), 1);
  EXPECT_EQ(attention_chunks(0, kAttentionChunk), 2);
  EXPECT_EQ(attention_chunks(kAttentionChunk - 1, kAttentionChunk), 2);
  EXPECT_EQ(chunk_first(10, 0), 10);
  EXPECT_EQ(chunk_last(10, 1000, 0), kAttentionChunk - 1);
  EXPECT_EQ(chunk_first(10, 1), kAttentionChunk);
  EXPECT_EQ(chunk_last(10, 300, 1), 300);
}

// What a position costs in each type: f32 4 bytes a value, f16 and bf16 2,
// q8_0 34 per 32 (and a whole scale for a short last block), q4_0 18 per 32
// (its codes by groups of 16 in 8 bytes, a short last group whole too).
TEST(KvPool, BytesOfEachType) {
  EXPECT_EQ(kv_value_bytes(KvType::f32, 64), 256u);
  EXPECT_EQ(kv_value_bytes(KvType::f16, 64), 128u);
  EXPECT_EQ(kv_value_bytes(KvType::bf16, 64), 128u);
  EXPECT_EQ(kv_value_bytes(KvType::q8_0, 64), 68u);
  EXPECT_EQ(kv_value_bytes(KvType::q8_0, 72), 78u);
  EXPECT_EQ(kv_key_block_bytes(KvType::q8_0, 64), 16u * 68);
  EXPECT_EQ(kv_key_block_bytes(KvType::f16, 64), 16u * 128);
  EXPECT_EQ(kv_value_bytes(KvType::q4_0, 64), 36u);
  EXPECT_EQ(kv_value_bytes(KvType::q4_0, 72), 40u + 6);
  EXPECT_EQ(kv_value_bytes(KvType::q4_0, 13), 8u + 2);
  EXPECT_EQ(kv_key_block_bytes(KvType::q4_0, 64), 16u * 36);
  EXPECT_EQ(kv_key_block_bytes(KvType::q4_0, 13), 13u * 8 + 16 * 2);
  for (const char* name : {"f32", "F16", "bf16", "Q8_0", "q4_0"}) EXPECT_TRUE(parse_kv_type(name)) << name;
  for (const char* name : {"", "q8", "f64", "q4_1", "q4", "f16 "}) EXPECT_FALSE(parse_kv_type(name)) << name;
  EXPECT_EQ(kv_type_names(), "f32, f16, bf16, q8_0 or q4_0");
}

// A key or value past what the type keeps (f16's 65504, q8_0's and q4_0's
// scale past f16's, bf16's largest finite; an infinity too) is stored as
// that limit, never as inf, and the pool says so once.
TEST(KvPool, ValuesBeyondTheCacheTypeAreClampedWithOneWarning) {
  const int hd = 40;  // q8_0, q4_0: a block of 32 and a short one
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0, KvType::q4_0}) {
    const float limit = kv_type_limit(type);
    std::vector<float> x(hd, 0.5f);
    x[3] = 1e5f, x[7] = -1e9f, x[33] = 3.4e38f, x[39] = -INFINITY;
    std::vector<uint8_t> keys(kv_key_block_bytes(type, hd)), values(kv_value_bytes(type, hd));
    const int beyond =
        static_cast<int>(std::count_if(x.begin(), x.end(), [&](float e) { return std::fabs(e) > limit; }));
    EXPECT_EQ(beyond, type == KvType::f16 ? 4 : type == KvType::q8_0 || type == KvType::q4_0 ? 3 : 2);
    EXPECT_EQ(store_keys(type, keys.data(), hd, 5, x.data()), beyond) << kv_type_name(type);
    EXPECT_EQ(store_values(type, values.data(), hd, x.data()), beyond) << kv_type_name(type);
    for (int i = 0; i < hd; ++i) {
      const float k = key_at(type, keys.data(), hd, i, 5), v = value_at(type, values.data(), hd, i);
      ASSERT_TRUE(std::isfinite(k) && std::isfinite(v)) << kv_type_name(type) << " element " << i;
      // The type's limit, as it keeps it: q4_0's codes reach -8 x scale but
      // only 7 x scale of the other sign, 7/8 of the limit there.
      const double off = type == KvType::q4_0 ? limit / 8 * 1.001 : limit * 1e-3;
      if (std::fabs(x[i]) > limit) {
        EXPECT_NEAR(k, std::copysign(limit, x[i]), off) << kv_type_name(type) << " element " << i;
        EXPECT_NEAR(v, std::copysign(limit, x[i]), off) << kv_type_name(type) << " element " << i;
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
  std::vector<float> q(hd, 1.0f), scratch(2 * attention_state_floats(1, hd)), out(hd);
  const float sink = 0;
  const std::vector<int32_t> table = {0};
  pool.attend(kernel_set(Isa::scalar), 0, table, 0, q.data(), 1, 0, 0, 1, 0.125f, &sink, scratch.data(), out.data());
  for (float o : out) EXPECT_TRUE(std::isfinite(o)) << o;
}

// The query's quantization for quantized keys: Q8_0's codec with a float
// scale; a zero block, one too small for a float inverse and one with an
// infinity or NaN each as kv_format.h says.
TEST(KvPool, QueryCodesOfEdgeBlocks) {
  std::vector<float> x(32);
  std::vector<int8_t> codes(32);
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.25f;
  EXPECT_EQ(query_codes(x.data(), 32, codes.data()), 4.0f / 127);
  EXPECT_EQ(codes[0], -127);
  EXPECT_EQ(codes[20], 32);  // 1 / (4 / 127) = 31.75
  for (const float tiny : {0.0f, 1e-38f}) {
    std::fill(x.begin(), x.end(), tiny);
    EXPECT_EQ(query_codes(x.data(), 13, codes.data()), 0.0f) << tiny;
    EXPECT_EQ(std::count(codes.begin(), codes.begin() + 13, 0), 13) << tiny;
  }
  for (const float bad : {INFINITY, NAN}) {
    x[3] = bad;
    EXPECT_TRUE(std::isnan(query_codes(x.data(), 32, codes.data()))) << bad;
    EXPECT_EQ(std::count(codes.begin(), codes.end(), 0), 32) << bad;
  }
  // The vector sets quantize so too: a query whose blocks are zero, tiny and
  // ordinary scores as the scalar set's.
  const int hd = 96;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (KvType type : {KvType::q8_0, KvType::q4_0}) {
    std::vector<uint8_t> kb(kv_key_block_bytes(type, hd)), rows(kKeyBlock * kv_value_bytes(type, hd));
    std::vector<float> k(hd), q(hd);
    std::vector<const uint8_t*> v(kKeyBlock);
    for (int lane = 0; lane < kKeyBlock; ++lane) {
      for (float& f : k) f = normal(rng);
      store_keys(type, kb.data(), hd, lane, k.data());
      v[lane] = rows.data() + lane * kv_value_bytes(type, hd);
      store_values(type, rows.data() + lane * kv_value_bytes(type, hd), hd, k.data());
    }
    for (int i = 0; i < hd; ++i) q[i] = i < 32 ? 0.0f : i < 64 ? 1e-38f : normal(rng);
    const uint8_t* blocks[1] = {kb.data()};
    std::vector<float> want(hd);
    float want_max = -INFINITY, want_sum = 0;
    kScalarKernels.attend_run[static_cast<int>(type)](q.data(), 1, hd, blocks, v.data(), 0.125f, 0, kKeyBlock,
                                                      &want_max, &want_sum, want.data());
    for (Isa isa : supported_isas()) {
      std::vector<float> got(hd);
      float max = -INFINITY, sum = 0;
      kernel_set(isa).attend_run[static_cast<int>(type)](q.data(), 1, hd, blocks, v.data(), 0.125f, 0, kKeyBlock, &max,
                                                         &sum, got.data());
      EXPECT_EQ(max, want_max) << isa_name(isa) << " " << kv_type_name(type);
      for (int i = 0; i < hd; ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << isa_name(isa) << " " << kv_type_name(type);
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
