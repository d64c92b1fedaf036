// tpsrun --parallel K: every sequence gets what it gets alone. Greedy, the
// same tokens as the prompt run by itself, on one rank and under every split
// on two; sampled, sequence i draws with seed + i, as a run alone with that
// seed does.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/temp_path.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using nlohmann::json;
using testing::run_tool;

const std::vector<std::string> kPrompts = {"The capital of France is",
                                           "def fib(n):", "Once upon a time, in a land far away"};

json tpsrun(int ranks, const std::string& args) {
  const std::string cmd = std::string(TPS_MPIEXEC) + " -np " + std::to_string(ranks) + " " + TPSRUN_PATH + " -q -m " +
                          TPS_TEST_MODELS + "/gpt-oss-tiny.gguf " + args + " --json";
  auto r = run_tool(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

std::string prompts_file() {
  const std::string path = testing::temp_path("prompts.txt");
  std::ofstream out(path);
  for (const std::string& p : kPrompts) out << p << "\n";
  return path;
}

TEST(Parallel, EachSequenceAsAlone) {
  std::vector<json> alone;
  for (const std::string& p : kPrompts) {
    alone.push_back(tpsrun(1, "-p '" + p + "' -n 12 --temp 0"));
    ASSERT_FALSE(alone.back().is_null());
  }
  const std::string file = prompts_file();
  for (const auto& [ranks, split] :
       std::vector<std::pair<int, std::string>>{{1, "auto"}, {2, "tensor"}, {2, "experts"}, {2, "layers"}}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + split + " split");
    json got = tpsrun(ranks, "--prompts-file " + file + " --parallel 3 -n 12 --temp 0 --split " + split);
    ASSERT_FALSE(got.is_null());
    ASSERT_EQ(got["sequences"].size(), kPrompts.size());
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_EQ(got["sequences"][i]["generated_ids"], alone[i]["generated_ids"]) << "sequence " << i;
      EXPECT_EQ(got["sequences"][i]["prompt_tokens"], alone[i]["prompt_tokens"]) << "sequence " << i;
    }
  }
}

TEST(Parallel, SequenceIDrawsWithSeedPlusI) {
  json both = tpsrun(1, "-p 'Tell me a story' --parallel 2 -n 12 --temp 1 --seed 40");
  json second = tpsrun(1, "-p 'Tell me a story' -n 12 --temp 1 --seed 41");
  ASSERT_FALSE(both.is_null() || second.is_null());
  EXPECT_EQ(both["sequences"][1]["generated_ids"], second["generated_ids"]);
  EXPECT_NE(both["sequences"][0]["generated_ids"], both["sequences"][1]["generated_ids"]);
}

}  // namespace
}  // namespace tps
