// The sampler: greedy, the filters, seeds, log-probabilities; and split
// across ranks, the same tokens as one rank (run at 1-4 ranks).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "engine/step/sampler.h"
#include "runtime/error.h"
#include "runtime/exchange.h"
#include "tests/mpi_test_env.h"
#include "topology/model_shape.h"

namespace tps {
namespace {

using testing::mpi;

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
  // And it keeps what it must: a token exactly as likely as the best
  // survives any min-p, so ids 1 and 3 are each drawn about half the time.
  for (float min_p : {0.5f, 0.99f}) {
    Sampler minp({1.0f, 0, 1.0f, min_p, 5});
    std::map<int, int> drawn;
    for (int i = 0; i < 400; ++i) ++drawn[minp.sample(logits)];
    EXPECT_EQ(drawn[1] + drawn[3], 400) << "min-p " << min_p;
    EXPECT_GT(drawn[1], 120) << "min-p " << min_p;
    EXPECT_GT(drawn[3], 120) << "min-p " << min_p;
  }
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

TEST(Sampler, InfiniteTemperatureIsRefusedAsNotFinite) {
  for (float t : {INFINITY, NAN}) {
    try {
      validate({t, 0, 1.0f, 0.0f, 0});
      ADD_FAILURE() << t << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("finite"), std::string::npos) << e.what();
    }
  }
  try {
    validate({-1.0f, 0, 1.0f, 0.0f, 0});
    ADD_FAILURE() << "-1 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
  }
}

TEST(Sampler, TopLogprobs) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  auto top = top_logprobs(logits, 5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_NEAR(top[0].logprob, std::log(0.75f), 1e-6);
  EXPECT_NEAR(logprob_of(logits, 0), std::log(0.25f), 1e-6);
}

// Logits every rank can make whole: flat, peaked, tied.
std::vector<float> logits(size_t vocab, int kind) {
  std::vector<float> v(vocab);
  uint64_t z = 12345;
  for (size_t i = 0; i < vocab; ++i) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    const float u = static_cast<float>(z >> 40) / static_cast<float>(1 << 24);
    v[i] = kind == 0 ? u * 2 : kind == 1 ? u * 12 : std::floor(u * 4);  // 2: many ties
  }
  return v;
}

TEST(Sampler, TopKAtTheVocabularyIsNoTopK) {
  // k >= the vocabulary keeps every token: the draws are those of no top-k
  // (the same path, which sorts nothing), with or without top-p.
  const std::vector<float> v = logits(1000, 0);
  for (float top_p : {1.0f, 0.9f}) {
    Sampler off({0.8f, 0, top_p, 0.0f, 7}), all({0.8f, 1000, top_p, 0.0f, 7}), more({0.8f, 5000, top_p, 0.0f, 7});
    for (int i = 0; i < 200; ++i) {
      const int32_t id = off.sample(v);
      EXPECT_EQ(all.sample(v), id) << "draw " << i << ", top-p " << top_p;
      EXPECT_EQ(more.sample(v), id) << "draw " << i << ", top-p " << top_p;
    }
  }
}

TEST(SplitSampler, SameTokensAsOneRankFromTheSameLogits) {
  Exchange ex(mpi(), "auto", 16);
  for (size_t vocab : {size_t{1000}, size_t{201088}}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> all = logits(vocab, kind);
      const Range mine = even_share(static_cast<int64_t>(vocab), kVocabGranule, ex.rank(), ex.size());
      SplitLogits split{std::span<const float>(all.data() + mine.begin, mine.size()), mine.begin,
                        static_cast<int64_t>(vocab), ex};
      for (SamplerParams p : {SamplerParams{0.0f, 0, 1.0f, 0.0f, 1}, SamplerParams{1.0f, 0, 1.0f, 0.0f, 2},
                              SamplerParams{0.8f, 40, 1.0f, 0.0f, 3}, SamplerParams{1.0f, 0, 0.9f, 0.0f, 4},
                              SamplerParams{1.0f, 0, 0.3f, 0.0f, 5}, SamplerParams{1.0f, 0, 1.0f, 0.2f, 6},
                              SamplerParams{0.5f, 300, 0.95f, 0.05f, 7}, SamplerParams{0.9f, 1 << 20, 0.9f, 0.0f, 8}}) {
        SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " kind " << kind << " temp " << p.temperature
                                          << " top-k " << p.top_k << " top-p " << p.top_p << " min-p " << p.min_p);
        Sampler together(p), alone(p);
        const int draws = vocab > 10000 ? 3 : 20;  // the large vocabulary sorts slowly
        for (int draw = 0; draw < draws; ++draw) ASSERT_EQ(together.sample(split), alone.sample(all));
      }
      EXPECT_EQ(argmax(split), argmax(all));
      std::vector<TokenLogprob> a = top_logprobs(split, 7), b = top_logprobs(all, 7);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].id, b[i].id);
        EXPECT_EQ(a[i].logprob, b[i].logprob);
      }
      EXPECT_EQ(logprob_of(split, 777), logprob_of(all, 777));
    }
  }
}

// Rows sampled together (a step's sequences: sample_rows) draw what each
// draws alone from the whole vocabulary, with the same log-probabilities,
// on 1-4 ranks: greedy, temperature alone, top-k, top-p over the whole
// vocabulary (flat logits need several rounds of candidates), min-p, and
// alternatives with each.
TEST(SplitSampler, RowsTogetherDrawAsEachAlone) {
  Exchange ex(mpi(), "auto", 16);
  const size_t vocab = 5000;
  const Range mine = even_share(static_cast<int64_t>(vocab), kVocabGranule, ex.rank(), ex.size());
  const std::vector<SamplerParams> params = {
      {0.0f, 0, 1.0f, 0.0f, 1}, {1.0f, 0, 1.0f, 0.0f, 2},     {0.8f, 40, 1.0f, 0.0f, 3}, {1.0f, 0, 0.9f, 0.0f, 4},
      {1.0f, 0, 1.0f, 0.2f, 6}, {0.5f, 300, 0.95f, 0.05f, 7}, {1.0f, 0, 0.99f, 0.0f, 8}, {0.0f, 0, 1.0f, 0.0f, 9}};
  std::vector<std::vector<float>> whole;
  std::vector<float> rows;  // this rank's part of each row
  for (size_t i = 0; i < params.size(); ++i) {
    whole.push_back(logits(vocab, static_cast<int>(i % 3)));
    for (size_t k = 0; k < vocab; ++k) whole.back()[k] += 0.01f * static_cast<float>((k * (i + 1)) % 7);
    rows.insert(rows.end(), whole.back().begin() + mine.begin, whole.back().begin() + mine.end);
  }
  const SplitRows split{rows, static_cast<size_t>(mine.size()), mine.begin, static_cast<int64_t>(vocab), ex};
  std::vector<Sampler> together, alone;
  for (const SamplerParams& p : params) together.emplace_back(p), alone.emplace_back(p);
  for (int draw = 0; draw < 10; ++draw) {
    std::vector<Draw> draws;
    for (size_t i = 0; i < params.size(); ++i) draws.push_back({&together[i], static_cast<int>(i % 2) * 5});
    const std::vector<Drawn> got = sample_rows(split, draws);
    ASSERT_EQ(got.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "draw " << draw << ", row " << i);
      const int32_t id = alone[i].sample(whole[i]);
      EXPECT_EQ(got[i].id, id);
      if (draws[i].alternatives == 0) {
        EXPECT_TRUE(got[i].top.empty());
        continue;
      }
      EXPECT_EQ(got[i].logprob, logprob_of(whole[i], id));
      const std::vector<TokenLogprob> top = top_logprobs(whole[i], 5);
      ASSERT_EQ(got[i].top.size(), top.size());
      for (size_t k = 0; k < top.size(); ++k) {
        EXPECT_EQ(got[i].top[k].id, top[k].id);
        EXPECT_EQ(got[i].top[k].logprob, top[k].logprob);
      }
    }
  }
}

// A step's rows share each round of the exchange: 16 greedy sequences take
// one collective, not 16; 16 sampled ones three (the best; the sums; the
// drawn chunk's owner), with their alternatives in the same rounds.
TEST(SplitSampler, OneCollectivePerRoundForAllRows) {
  Exchange ex(mpi(), "auto", 16);
  if (ex.size() == 1) GTEST_SKIP() << "one rank exchanges nothing";
  const size_t vocab = 1000;
  const Range mine = even_share(static_cast<int64_t>(vocab), kVocabGranule, ex.rank(), ex.size());
  const std::vector<float> all = logits(vocab, 1);
  std::vector<float> rows;
  for (int i = 0; i < 16; ++i) rows.insert(rows.end(), all.begin() + mine.begin, all.begin() + mine.end);
  const SplitRows split{rows, static_cast<size_t>(mine.size()), mine.begin, static_cast<int64_t>(vocab), ex};
  for (const auto& [temperature, alternatives, collectives] :
       {std::tuple{0.0f, 0, 1u}, std::tuple{0.0f, 5, 2u}, std::tuple{1.0f, 0, 3u}, std::tuple{1.0f, 5, 3u}}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << temperature << ", alternatives " << alternatives);
    std::vector<Sampler> samplers(16, Sampler({temperature, 0, 1.0f, 0.0f, 3}));
    std::vector<Draw> draws;
    for (Sampler& s : samplers) draws.push_back({&s, alternatives});
    const uint64_t before = ex.stats().calls;
    sample_rows(split, draws);
    EXPECT_EQ(ex.stats().calls - before, collectives);
  }
}

}  // namespace
}  // namespace tps
