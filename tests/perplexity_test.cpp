// `tpsrun perplexity` as users run it on the tiny model: what it reports
// against tpsrun score's log-probabilities of the same windows, a saved base
// against itself, every split against one rank, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/eval/logits_file.h"
#include "tests/temp_path.h"
#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using testing::run_tool;
using testing::temp_path;

const std::string kModel = std::string(tps::test_paths::models) + "/gpt-oss-tiny.gguf";
// The tiny model in 16 bits: F16 dense weights, BF16 experts.
const std::string kF16Model = std::string(tps::test_paths::models) + "/gpt-oss-tiny-f16.gguf";

std::string tpsrun(const std::string& args, const std::string& model = kModel) {
  return std::string(tps::test_paths::tpsrun) + " -q -m " + model + " " + args;
}

// A text of a few hundred tokens, with no newline at its end.
std::string write_text(const std::string& name, int sentences) {
  const std::string path = temp_path(name);
  std::ofstream out(path);
  for (int i = 0; i < sentences; ++i)
    out << (i ? " " : "") << "Sentence " << i << " of the test text counts " << i * 7 % 13 << " apples.";
  return path;
}

nlohmann::json perplexity(const std::string& args, const std::string& launcher = "",
                          const std::string& model = kModel) {
  auto r = run_tool(launcher + tpsrun("perplexity --json " + args, model));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

TEST(Perplexity, IsTheScoreOfEachWindowsSecondHalf) {
  const std::string text = write_text("ppl-text.txt", 12);
  const int window = 32;
  const nlohmann::json j = perplexity("--ctx 32 -f " + text);
  ASSERT_FALSE(j.empty());
  // The same windows scored one by one: ids from the tokenizer, then each
  // window's log-probabilities from `tpsrun score`.
  auto ids = run_tool(std::string(tps::test_paths::tpsrun) + " tokenize --no-parse-special --ids-only -m " + kModel +
                      " --file " + text);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  const std::vector<int32_t> tokens = nlohmann::json::parse(ids.out);
  const int windows = static_cast<int>(tokens.size() / window);
  ASSERT_GE(windows, 2);
  EXPECT_EQ(j["windows"], windows);
  double nll = 0;
  int n = 0;
  for (int w = 0; w < windows; ++w) {
    const std::string file = temp_path("ppl-window.txt");
    std::string list =
        nlohmann::json(std::vector<int32_t>(tokens.begin() + w * window, tokens.begin() + (w + 1) * window)).dump();
    for (char& c : list)
      if (c == ',' || c == '[' || c == ']') c = ' ';
    std::ofstream(file) << list;
    auto s = run_tool(tpsrun("score --json --ctx 32 --ids " + file));
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const nlohmann::json scored = nlohmann::json::parse(s.out);
    for (const auto& p : scored["positions"])
      if (p["pos"].get<int>() >= window / 2) nll -= p["next_logprob"].get<double>(), ++n;
    std::remove(file.c_str());
  }
  EXPECT_EQ(j["scored_tokens"], n);
  EXPECT_EQ(n, windows * (window - 1 - window / 2));
  EXPECT_NEAR(j["ppl"]["value"].get<double>(), std::exp(nll / n), 1e-4 * std::exp(nll / n));
  EXPECT_GT(j["ppl"]["error"].get<double>(), 0);
  std::remove(text.c_str());
}

TEST(Perplexity, ASavedBaseAgainstItselfAgrees) {
  const std::string text = write_text("ppl-base-text.txt", 30), base = temp_path("ppl-base.logits");
  const nlohmann::json saved = perplexity("--ctx 32 -f " + text + " --save-logits " + base);
  ASSERT_FALSE(saved.empty());
  const nlohmann::json k = perplexity("--kl-base " + base);
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k["scored_tokens"], saved["scored_tokens"]);
  EXPECT_LT(k["kl"]["kl_divergence"]["value"].get<double>(), 1e-5);
  EXPECT_EQ(k["kl"]["same_top"]["value"].get<double>(), 1.0);
  const double ppl = saved["ppl"]["value"].get<double>();
  EXPECT_NEAR(k["kl"]["ppl"]["value"].get<double>(), ppl, 1e-4 * ppl);
  EXPECT_NEAR(k["kl"]["base_ppl"]["value"].get<double>(), ppl, 1e-3 * ppl);  // 16-bit steps
  std::remove(text.c_str()), std::remove(base.c_str());
}

TEST(Perplexity, EverySplitGivesOneRanksFigure) {
  const std::string text = write_text("ppl-split-text.txt", 30);
  const double one = perplexity("--ctx 32 -f " + text)["ppl"]["value"].get<double>();
  for (const char* split : {"tensor", "experts", "layers"}) {
    const nlohmann::json j =
        perplexity(std::string("--ctx 32 -f ") + text + " --split " + split, std::string(TPS_MPIEXEC) + " -np 2 ");
    ASSERT_FALSE(j.empty()) << split;
    EXPECT_EQ(j["ranks"], 2);
    EXPECT_EQ(j["ppl"]["value"].get<double>(), one) << split;  // every split gives one rank's bits
  }
  std::remove(text.c_str());
}

// --quantize on a 16-bit file, measured as users measure it: against the
// 16-bit run's saved log-probabilities. Q8_0 weights stay within a KL
// divergence of 0.001 (0.0004 measured) and keep the top token 95% of the
// time (96.8% measured: the synthetic model's best tokens are near-ties,
// and a Q8_0 file of the small model keeps 96.4%, so the 98% a peaked real
// model gives is out of reach here); int4 costs more than int8; two ranks
// convert their shards to the same model as one.
TEST(Perplexity, QuantizedAtLoadAgainstTheSixteenBitModel) {
  const std::string text = write_text("ppl-quantize-text.txt", 40), base = temp_path("ppl-f16.logits");
  ASSERT_FALSE(perplexity("--ctx 64 -f " + text + " --save-logits " + base, "", kF16Model).empty());
  auto kl = [&](const std::string& args, const std::string& launcher = "") {
    const nlohmann::json j = perplexity("--kl-base " + base + " " + args, launcher, kF16Model);
    return j.empty() ? nlohmann::json{} : j["kl"];
  };
  const nlohmann::json int8 = kl("--quantize int8"), int4 = kl("--quantize int4");
  ASSERT_FALSE(int8.empty() || int4.empty());
  EXPECT_LT(int8["kl_divergence"]["value"].get<double>(), 0.001);
  EXPECT_GE(int8["same_top"]["value"].get<double>(), 0.95);
  EXPECT_GT(int4["kl_divergence"]["value"].get<double>(), 4 * int8["kl_divergence"]["value"].get<double>());
  const nlohmann::json split = kl("--quantize int4", std::string(TPS_MPIEXEC) + " -np 2 ");
  ASSERT_FALSE(split.empty());
  EXPECT_EQ(split["ppl"]["value"], int4["ppl"]["value"]);
  std::remove(text.c_str()), std::remove(base.c_str());
}

TEST(Perplexity, BadInputIsOneLine) {
  auto one_line = [](const std::string& args, const std::string& fragment) {
    auto r = run_tool(tpsrun("perplexity " + args));
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  const std::string text = write_text("ppl-short.txt", 3);
  one_line("--ctx 64 -f " + text, "need at least 128");
  // Windows too short to score a token (--ctx 2 printed PPL = -nan, exit 0).
  for (const std::string ctx : {"1", "2", "3"})
    one_line("--ctx " + ctx + " -f " + text, "--ctx " + ctx + ": a window of at least 4 tokens");
  one_line("--kl-base " + text, "not a logits file");
  one_line("", "give the text with -f FILE");
  one_line("-f " + text + " --kl-base " + text, "excludes");
  // --quantize: a role already at a lower precision (the release's MXFP4
  // experts), rows that are not whole blocks, text that is not a plan.
  one_line("--ctx 16 -f " + text + " --quantize experts=q8_0", "is MXFP4, already at this precision or lower");
  one_line("--ctx 16 -f " + text + " --quantize attn=q4_k", "not a whole number of Q4_K's 256-value blocks");
  one_line("-f " + text + " --quantize attn:q8_0", "'attn:q8_0': expected int8, int4 or ROLE=TYPE");
  // Log-probabilities over another vocabulary.
  const std::string other = temp_path("ppl-other.logits");
  {
    LogitsFileWriter w(other, 8, 7, std::vector<int32_t>(16, 1));
    for (int k = 0; k < 2 * scored_per_chunk(8); ++k) w.add(std::vector<float>(7, 0.f));
    w.finish();
  }
  one_line("--kl-base " + other, "a base from another model family");
  std::remove(text.c_str()), std::remove(other.c_str());
}

}  // namespace
}  // namespace tps
