// tps against llama.cpp itself (node-llama-cpp's prebuilt CPU build) on the
// small synthetic model: the same 64 tokens fed to both (teacher forcing),
// next-token distributions compared at every position. tps runs with
// --yarn-truncate, llama.cpp's rounding of the YaRN range; llama.cpp runs
// with flash attention off and an F32 KV cache, which computes what tps
// computes (both round matmul inputs to Q8_0).
//
// Measured (2026-11-23): median |d logprob| 0.013 nats, p90 0.029, largest
// 0.045; top-1 differs at 2 of 63 positions, both near-ties (the two tokens
// within 0.003 nats in tps). Until tps's kernels paired blocks
// (kernels/packed_rows.h) they summed in ggml's float order and agreed to a
// median 9e-7; now a last-bit difference in a product sometimes rounds a
// Q8_0 activation the other way (first at position 22 here), and that
// difference stays in the KV cache. llama.cpp differs from itself by a
// median 0.036 between its own settings (flash attention, F16 KV cache).
// tps against the plain reference, which follows tps's own rounding, is
// held to far less (forward_test). Tolerances: median <= 0.03, largest
// <= 0.1, and where top-1 differs, llama.cpp's choice is within 0.02 nats of
// tps's in tps's own distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/tool_runner.h"

namespace tps {
namespace {

TEST(LlamaParity, SmallModelNextTokenDistributions) {
  const std::string model = std::string(TPS_TEST_MODELS) + "/gpt-oss-small.gguf";
  const std::string ids_path = ::testing::TempDir() + "/tps-parity-ids.txt";
  {
    std::ofstream ids(ids_path);
    ids << "200006 17360 200008";
    for (int i = 0; i < 61; ++i) ids << ' ' << (i * 7919 + 13) % 199998;
  }
  auto tps = testing::run_tool(std::string(TPSRUN_PATH) + " -q score -m " + model + " --ids " + ids_path +
                               " --top-logprobs 20 --json --yarn-truncate");
  ASSERT_EQ(tps.exit_code, 0) << tps.err;
  auto llama = testing::run_tool(std::string(NODE_EXECUTABLE) + " " TPS_REFERENCE_DIR "/llama_ref.mjs score " + model +
                                 " --ids " + ids_path + " --top 5 --flash-attn off --kv-type f32");
  ASSERT_EQ(llama.exit_code, 0) << "llama.cpp did not run (scripts/install-deps installs "
                                   "node-llama-cpp):\n"
                                << llama.err;
  auto a = nlohmann::json::parse(tps.out)["positions"];
  auto b = nlohmann::json::parse(llama.out)["positions"];
  ASSERT_EQ(a.size(), b.size());

  std::vector<double> diffs;
  int top1 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    std::map<int, double> ours;
    for (const auto& t : a[i]["top"]) ours[t[0].get<int>()] = t[1].get<double>();
    double worst = 0;
    for (const auto& t : b[i]["top"]) {
      auto it = ours.find(t[0].get<int>());
      // llama.cpp's top-5 must be among tps's top 20.
      worst = std::max(worst, it == ours.end() ? INFINITY : std::fabs(it->second - t[1].get<double>()));
    }
    diffs.push_back(worst);
    if (a[i]["top"][0][0] == b[i]["top"][0][0]) {
      ++top1;
    } else {
      auto theirs = ours.find(b[i]["top"][0][0].get<int>());
      const double gap = theirs == ours.end() ? INFINITY : a[i]["top"][0][1].get<double>() - theirs->second;
      EXPECT_LE(gap, 0.02) << "position " << i << ": top-1 differs by more than a near-tie";
    }
  }
  std::sort(diffs.begin(), diffs.end());
  const double median = diffs[diffs.size() / 2], p90 = diffs[diffs.size() * 9 / 10];
  std::printf(
      "tps vs llama.cpp over %zu positions: top-1 agrees at %d, |d logprob| median %.2g, "
      "p90 %.2g, max %.2g\n",
      diffs.size(), top1, median, p90, diffs.back());
  EXPECT_LE(median, 0.03);
  EXPECT_LE(diffs.back(), 0.1);
}

}  // namespace
}  // namespace tps
