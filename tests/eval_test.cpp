// The quality measures against hand-computed values and llama-perplexity's
// conventions: its normaliser, its 16-bit log-probabilities and their file,
// its uncertainties and percentiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "engine/eval/logits_file.h"
#include "engine/eval/token_scores.h"
#include "runtime/error.h"
#include "tests/temp_path.h"

namespace tps {
namespace {

std::vector<float> random_logits(int n, uint32_t seed, float spread = 8) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, spread);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Eval, LogSoftmaxIsTheNormaliser) {
  const std::vector<float> l = random_logits(1000, 1);
  const LogSoftmax s = log_softmax(l);
  double z = 0;
  for (float x : l) z += std::exp(static_cast<double>(x));
  // (The difference from the max is taken in float, as llama.cpp does.)
  for (int i : {0, 17, 999}) EXPECT_NEAR(s.logprob(l[i]), l[i] - std::log(z), 1e-5);
}

TEST(Eval, SixteenBitLogprobsAreWithinHalfAStep) {
  std::vector<float> l = random_logits(999, 2);
  l[5] = -1000;  // far below the floor (max - 16): kept at the floor
  float scale = 0, floor = 0;
  std::vector<uint16_t> steps(l.size());
  quantize_logprobs(l, scale, floor, steps);
  const BaseRow row{scale, floor, steps};
  const LogSoftmax s = log_softmax(l);
  for (size_t i = 0; i < l.size(); ++i) {
    const double exact = s.logprob(l[i]);
    if (l[i] > s.max - 16) {
      EXPECT_NEAR(row.logprob(static_cast<int32_t>(i)), exact, scale * 0.5 + 1e-5) << i;
    } else {
      EXPECT_EQ(steps[i], 0) << i;
    }
  }
  EXPECT_NEAR(row.logprob(5), s.max - 16 - s.max - s.log_sum, 1e-4);
  EXPECT_EQ(*std::max_element(steps.begin(), steps.end()), 65535);
}

TEST(Eval, LogitsFileRoundTripsAndRefusesWhatItIsNot) {
  const int n_ctx = 8, n_vocab = 7;  // an odd vocabulary: rows are padded
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2};
  const std::string path = testing::temp_path("base.logits");
  std::vector<std::vector<float>> rows;
  {
    LogitsFileWriter w(path, n_ctx, n_vocab, tokens);
    for (int k = 0; k < 2 * scored_per_chunk(n_ctx); ++k) {
      rows.push_back(random_logits(n_vocab, 10 + k));
      w.add(rows.back());
    }
    w.finish();
  }
  // llama-perplexity's layout: 20 bytes, the tokens, 3 rows a chunk of
  // 4 + 8 words.
  EXPECT_EQ(std::filesystem::file_size(path), 20u + 16 * 4 + 2 * 3 * 12 * 2);
  const LogitsFile f(path);
  EXPECT_EQ(f.n_ctx(), n_ctx);
  EXPECT_EQ(f.n_vocab(), n_vocab);
  EXPECT_EQ(f.n_chunk(), 2);
  EXPECT_EQ(std::vector<int32_t>(f.tokens().begin(), f.tokens().end()), tokens);
  for (int k = 0; k < 6; ++k) {
    const LogSoftmax s = log_softmax(rows[k]);
    const BaseRow r = f.row(k);
    for (int i = 0; i < n_vocab; ++i) {  // those below max - 16 at the floor
      const double exact = std::max(s.logprob(rows[k][i]), -16 - s.log_sum);
      EXPECT_NEAR(r.logprob(i), exact, r.scale + 1e-5) << k << " " << i;
    }
  }

  auto refused = [](const std::string& file, const std::string& fragment) {
    try {
      LogitsFile g(file);
      ADD_FAILURE() << file << " was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  // A row whose scale or floor is not a finite number (a NaN base gave a
  // KL divergence of 0): the file is refused, naming the row.
  const uint64_t rows_at = 20 + tokens.size() * 4, row_bytes = 12 * 2;
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    for (const uint64_t field : {0, 4}) {  // the scale, the floor
      const std::string spoiled = testing::temp_path("base-nan.logits");
      std::filesystem::copy_file(path, spoiled, std::filesystem::copy_options::overwrite_existing);
      std::fstream io(spoiled, std::ios::in | std::ios::out | std::ios::binary);
      io.seekp(static_cast<std::streamoff>(rows_at + 4 * row_bytes + field));
      io.write(reinterpret_cast<const char*>(&bad), sizeof bad);
      io.close();
      refused(spoiled, "row 4");
      std::remove(spoiled.c_str());
    }
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 2);
  refused(path, "truncated");
  { std::ofstream(path) << "GGUF and more bytes than a header"; }
  refused(path, "not a logits file");
  std::remove(path.c_str());
}

TEST(Eval, AnUnfinishedLogitsFileIsRemoved) {
  const std::string path = testing::temp_path("unfinished.logits");
  {
    LogitsFileWriter w(path, 8, 4, std::vector<int32_t>(8, 1));
    w.add(random_logits(4, 3));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Eval, KlAgainstABaseIsTheDivergenceOfTheTwoDistributions) {
  // Base p = (1/2, 1/2), this model q = (1/4, 3/4): KL(p || q) =
  // 1/2 ln 2 + 1/2 ln(2/3).
  const std::vector<float> base_logits = {0, 0}, logits = {0, std::log(3.f)};
  float scale = 0, floor = 0;
  std::vector<uint16_t> steps(2);
  quantize_logprobs(base_logits, scale, floor, steps);
  const TokenComparison t = compare(logits, BaseRow{scale, floor, steps}, 0);
  EXPECT_NEAR(t.kl, 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3), 1e-6);
  EXPECT_NEAR(t.nll, std::log(4.0), 1e-6);
  EXPECT_NEAR(t.base_nll, std::log(2.0), 1e-6);
  EXPECT_NEAR(t.delta_p, 0.25 - 0.5, 1e-6);
  EXPECT_FALSE(t.same_top);  // the base's tie goes to its first token; this model's best is the second
}

TEST(Eval, AModelAgainstItsOwnBaseAgrees) {
  const std::vector<float> l = random_logits(5000, 4, 2);  // all above the floor
  float scale = 0, floor = 0;
  std::vector<uint16_t> steps(l.size());
  quantize_logprobs(l, scale, floor, steps);
  const TokenComparison t = compare(l, BaseRow{scale, floor, steps}, 42);
  EXPECT_LT(std::abs(t.kl), scale);  // what 16-bit steps leave
  EXPECT_TRUE(t.same_top);
  EXPECT_NEAR(t.nll, t.base_nll, scale);
  EXPECT_NEAR(t.delta_p, 0, 1e-6);
}

TEST(Eval, PerplexityAndItsError) {
  PerplexityStats s;
  for (double nll : {1.0, 2.0, 3.0}) s.add(nll);
  EXPECT_NEAR(s.ppl(), std::exp(2.0), 1e-12);
  // Variance over tokens 2/3; error of the mean sqrt(2/3 / 2); times PPL.
  EXPECT_NEAR(s.ppl_error(), std::sqrt(1.0 / 3) * std::exp(2.0), 1e-12);
}

TEST(Eval, KlReportFollowsLlamaPerplexity) {
  KlStats s;
  for (int i = 0; i < 10; ++i) s.add({.nll = 1.0 + i % 2, .base_nll = 1.0, .kl = 0.1 * i, .same_top = i < 7});
  KlReport r = s.report();
  EXPECT_EQ(r.tokens, 10);
  EXPECT_NEAR(r.kl.value, 0.45, 1e-12);
  EXPECT_EQ(r.kl.error, 0);  // 10 tokens or fewer: no error given
  EXPECT_NEAR(r.same_top.value, 0.7, 1e-12);
  EXPECT_NEAR(r.same_top.error, std::sqrt(0.7 * 0.3 / 9), 1e-12);
  EXPECT_NEAR(r.ppl.value, std::exp(1.5), 1e-9);
  EXPECT_NEAR(r.base_ppl.value, std::exp(1.0), 1e-9);
  EXPECT_STREQ(r.kl_quantiles.front().name, "Maximum");
  EXPECT_NEAR(r.kl_quantiles.front().value, 0.9, 1e-6);
  EXPECT_STREQ(r.kl_quantiles.back().name, "Minimum");
  s.add({.nll = 1, .base_nll = 1, .kl = 1});
  EXPECT_GT(s.report().kl.error, 0);
}

TEST(Eval, PercentilesInterpolateAndTheMedianOfAnEvenCountIsAMean) {
  const std::vector<float> v = {1, 2, 3, 4, 5};
  EXPECT_NEAR(percentile(v, 0.5f), 3, 1e-6);
  EXPECT_NEAR(percentile(v, 0.1f), 1.4, 1e-6);
  EXPECT_NEAR(percentile(v, 0.999f), 4.996, 1e-5);
  EXPECT_EQ(percentile(v, 0), 1);
  EXPECT_EQ(percentile(v, 1), 5);
  KlStats s;
  for (float kl : {4.f, 1.f, 3.f, 2.f}) s.add({.kl = kl});
  for (const auto& q : s.report().kl_quantiles) {
    if (std::string(q.name) == "Median") {
      EXPECT_NEAR(q.value, 2.5, 1e-9);
    }
  }
}

}  // namespace
}  // namespace tps
