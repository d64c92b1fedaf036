// tpstopo as users run it: JSON for described machines against golden files,
// exit code 2 with a one-line message for bad input, bandwidth on this host.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using nlohmann::json;
using testing::run_tool;

std::string tpstopo(const std::string& args) { return std::string(tps::test_paths::tpstopo) + " " + args; }

json golden(const std::string& name) {
  std::ifstream in(std::string(tps::test_paths::data) + "/" + name);
  EXPECT_TRUE(in) << "missing golden file " << name;
  return json::parse(in);
}

void expect_json_matches(const std::string& args, const std::string& golden_name) {
  auto r = run_tool(tpstopo(args));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json got = json::parse(r.out);
  json want = golden(golden_name);
  EXPECT_EQ(got, want) << "tpstopo " << args << " differs from " << golden_name << "; got:\n" << got.dump(2);
}

TEST(Tpstopo, TwoSocketSyntheticJson) {
  expect_json_matches("--synthetic 'pack:2 numa:1 l3:1 core:4 pu:2' --ranks 2 --json", "tpstopo-2pkg.json");
}

TEST(Tpstopo, FourSocketSyntheticJson) {
  expect_json_matches("--synthetic 'pack:4 numa:2 core:4 pu:1' --ranks 4 --json", "tpstopo-4pkg.json");
}

TEST(Tpstopo, AsymmetricXmlJson) {
  expect_json_matches(std::string("--input ") + tps::test_paths::data +
                          "/asymmetric-2pkg-cxl.xml --ranks 3 --json | sed 's|" + tps::test_paths::data + "/||'",
                      "tpstopo-asymmetric.json");
}

TEST(Tpstopo, ModelBytesPerRank) {
  auto r = run_tool(tpstopo("--synthetic 'pack:2 [numa(memory=1000000)] core:2 pu:1' --model " +
                            std::string(tps::test_paths::models) + "/gpt-oss-tiny.gguf --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json m = json::parse(r.out)["model"];
  json layers = m["splits"]["layers"]["ranks"];
  ASSERT_EQ(layers.size(), 2u);  // one rank per node by default
  EXPECT_EQ(layers[0]["layers"], json::array({0, 1}));
  EXPECT_EQ(layers[1]["layers"], json::array({1, 2}));
  uint64_t sum = layers[0]["bytes"].get<uint64_t>() + layers[1]["bytes"].get<uint64_t>();
  EXPECT_EQ(sum, m["weight_bytes"].get<uint64_t>());
  EXPECT_EQ(layers[0]["fits"], false);  // 1 MB nodes hold no 13 MB share
  // tiny: 2 KV heads, 4 experts, 64 features (two blocks of 32).
  json experts = m["splits"]["experts"]["ranks"];
  EXPECT_EQ(experts[1]["experts"], json::array({2, 4}));
  EXPECT_EQ(experts[1]["kv_heads"], json::array({1, 2}));
  json tensor = m["splits"]["tensor"]["ranks"];
  EXPECT_EQ(tensor[0]["ff"], json::array({0, 32}));
  EXPECT_EQ(tensor[1]["vocab"], json::array({100608, 201088}));  // chunks of 256 ids
  auto three = run_tool(tpstopo("--synthetic 'pack:3 numa:1 core:2 pu:1' --model " +
                                std::string(tps::test_paths::models) + "/gpt-oss-tiny.gguf --json"));
  ASSERT_EQ(three.exit_code, 0) << three.err;
  json t3 = json::parse(three.out)["model"]["splits"];
  // More ranks than tiny has layers, KV heads or feature blocks: a rank
  // holds none of them, and the plan says so.
  EXPECT_EQ(t3["layers"]["ranks"][2]["idle"], json::array({"layers"}));
  EXPECT_EQ(t3["tensor"]["ranks"][0]["idle"], json::array({"attention heads", "expert features"}));
  EXPECT_EQ(t3["experts"]["ranks"].size(), 3u);
  auto bad = run_tool(tpstopo("--model /no/such.gguf"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("/no/such.gguf: cannot open"), std::string::npos) << bad.err;
}

// --quantize plans the weights in the types tpsrun would convert them to:
// the 16-bit tiny model at int8 is about half its bytes (F16 and BF16 to
// Q8_0's 8.5 bits a weight), and a conversion tpsrun would refuse is
// refused here.
TEST(Tpstopo, QuantizedModelIsPlannedInItsNewTypes) {
  const std::string model = std::string(tps::test_paths::models) + "/gpt-oss-tiny-f16.gguf";
  auto weights = [&](const std::string& args) {
    auto r = run_tool(tpstopo("--synthetic 'pack:2 numa:1 core:2 pu:1' --json --model " + model + " " + args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code ? json{} : json::parse(r.out)["model"];
  };
  const json f16 = weights(""), int8 = weights("--quantize int8");
  ASSERT_FALSE(f16.empty() || int8.empty());
  EXPECT_EQ(int8["quantize"], "int8");
  const double ratio = int8["weight_bytes"].get<double>() / f16["weight_bytes"].get<double>();
  EXPECT_NEAR(ratio, 8.5 / 16, 0.02);
  const json ranks = int8["splits"]["tensor"]["ranks"];
  EXPECT_LT(ranks[0]["read_bytes_per_token"].get<double>(),
            0.6 * f16["splits"]["tensor"]["ranks"][0]["read_bytes_per_token"].get<double>());
  auto bad = run_tool(
      tpstopo("--model " + std::string(tps::test_paths::models) + "/gpt-oss-tiny.gguf --quantize experts=q8_0"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("is MXFP4, already at this precision or lower"), std::string::npos) << bad.err;
}

TEST(Tpstopo, ThisHostText) {
  auto r = run_tool(tpstopo("--ranks 2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("machine: this host"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("this process may use PUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: NUMA node"), std::string::npos) << r.out;
}

TEST(Tpstopo, BandwidthOnThisHost) {
  auto r = run_tool(tpstopo("--bandwidth --bandwidth-mib 32 --repetitions 3 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_FALSE(j["bandwidth"].empty());
  for (const json& b : j["bandwidth"]) {
    EXPECT_GT(b["best_gb_per_s"].get<double>(), 0.1) << b.dump();
    EXPECT_GE(b["best_gb_per_s"].get<double>(), b["median_gb_per_s"].get<double>());
  }
}

void expect_usage_error(const std::string& args, const std::string& fragment) {
  auto r = run_tool(tpstopo(args));
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(Tpstopo, BadInputIsOneLineAndExitCode2) {
  expect_usage_error("--ranks 0", "--ranks: got '0', expected an integer >= 1");
  expect_usage_error("--ranks -1", "--ranks");
  expect_usage_error("--threads abc", "--threads");
  expect_usage_error("--synthetic 'pack:2 core:x'", "invalid synthetic topology 'pack:2 core:x'");
  expect_usage_error("--input /no/such.xml", "/no/such.xml");
  expect_usage_error(std::string("--input ") + tps::test_paths::data + "/not-a-topology.xml",
                     "not a valid hwloc XML topology");
  expect_usage_error("--input a.xml --synthetic 'pack:2'", "excludes");
  expect_usage_error("--synthetic 'pack:2 core:2 pu:1' --bandwidth", "--bandwidth measures this host");
  expect_usage_error("--no-such-flag", "--no-such-flag");
  // A bandwidth that projects nothing: nan (every comparison false), inf, 0.
  const std::string model = std::string("--model ") + tps::test_paths::models + "/gpt-oss-tiny.gguf";
  for (const std::string gbps : {"nan", "inf", "0", "-5"})
    expect_usage_error(model + " --node-gbps " + gbps, "--node-gbps: got '" + gbps + "', expected GB/s above 0");
}

// Plans on more hosts and the projected decode rate: cut inside layers the
// nodes read at once, a pipeline's stages one after another, so on 2 nodes
// tensor projects about twice layers; 2 hosts of 2 nodes: 4 ranks, host 1
// holding ranks 2 and 3, every rank reading its share of a token.
TEST(Tpstopo, ModelPlansAcrossHostsWithProjection) {
  auto r = run_tool(tpstopo("--synthetic 'pack:2 numa:1 core:2 pu:1' --hosts 2 --node-gbps 20 --model " +
                            std::string(tps::test_paths::models) + "/gpt-oss-small.gguf --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json m = json::parse(r.out)["model"];
  EXPECT_EQ(m["hosts"], 2);
  json tensor = m["splits"]["tensor"], layers = m["splits"]["layers"];
  ASSERT_EQ(tensor["ranks"].size(), 4u);
  EXPECT_EQ(tensor["ranks"][2]["host"], 1);
  uint64_t reads = 0;
  for (const json& x : layers["ranks"]) reads += x["read_bytes_per_token"].get<uint64_t>();
  // A pipeline reads one token's weights in turn: 20 GB/s over all of them.
  EXPECT_NEAR(layers["projected_tokens_per_s"].get<double>(), 20e9 / double(reads), 1e-6 * 20e9 / double(reads));
  const double ratio = tensor["projected_tokens_per_s"].get<double>() / layers["projected_tokens_per_s"].get<double>();
  EXPECT_GT(ratio, 2.0);  // 4 nodes reading at once, less what every rank reads whole
  EXPECT_LT(ratio, 4.0);
  auto text = run_tool(tpstopo("--synthetic 'pack:2 numa:1 core:2 pu:1' --node-gbps 20 --model " +
                               std::string(tps::test_paths::models) + "/gpt-oss-small.gguf"));
  EXPECT_NE(text.out.find("tensor: one sequence decodes at most "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" a token; node "), std::string::npos) << text.out;
}

// A preset is planned as its file is (tps-mkmodel --preset small wrote the
// test's), also converted; the 120b preset, too large to write here, holds
// the release's 63,374,323,968 bytes of tensors (spec 7.1).
TEST(Tpstopo, PresetIsPlannedAsItsFile) {
  auto plan = [](const std::string& args) {
    auto r = run_tool(tpstopo("--synthetic 'pack:2 numa:1 core:2 pu:1' --json --node-gbps 20 " + args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code ? json{} : json::parse(r.out)["model"];
  };
  const std::string small = std::string(tps::test_paths::models) + "/gpt-oss-small.gguf";
  for (const std::string quantize : {"", " --quantize int4"}) {
    const json file = plan("--model " + small + quantize), preset = plan("--preset small" + quantize);
    ASSERT_FALSE(file.empty() || preset.empty());
    EXPECT_EQ(preset["preset"], "small");
    EXPECT_EQ(preset["weight_bytes"], file["weight_bytes"]) << quantize;
    EXPECT_EQ(preset["splits"], file["splits"]) << quantize;
  }
  EXPECT_EQ(plan("--preset 120b")["weight_bytes"], 63374323968ull);
  auto alone = run_tool(tpstopo("--hosts 2"));
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--hosts requires --model or --preset"), std::string::npos) << alone.err;
}

TEST(Tpstopo, HelpDescribesEveryOption) {
  auto r = run_tool(tpstopo("--help"));
  EXPECT_EQ(r.exit_code, 0);
  for (const char* opt :
       {"--json", "--ranks", "--threads", "--input", "--synthetic", "--bandwidth", "--bandwidth-mib", "--repetitions"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace tps
