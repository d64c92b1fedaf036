// tpsrun --parallel: every sequence gets what it gets alone, whatever shares
// its steps. Four prompts (two sharing a long prefix, so the second reuses
// the first's cached blocks), two running at once, in steps of 16 tokens (so
// prompts go in chunks next to decode tokens), on 1-3 ranks, every split,
// over shared memory and over MPI messages, with the default KV cache: the
// greedy tokens of each and its top-5 log-probabilities equal the prompt
// run alone on one rank, to the bit (every split gives one rank's
// arithmetic: split_test). Sampled, sequence i draws with seed + i, as a
// run alone with that seed does. With speculation, the same as without.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/temp_path.h"
#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using nlohmann::json;
using testing::run_tool;

const std::string kShared =
    "You are a helpful assistant. Answer briefly and precisely, and say when you do not know. Think about "
    "units, check your arithmetic twice, and prefer the simplest explanation that fits the facts. Question: ";
const std::vector<std::string> kPrompts = {kShared + "what is the capital of France?",
                                           "def fib(n):", kShared + "how far is the moon?",
                                           "Once upon a time, in a land far away"};

json tpsrun(int ranks, const std::string& args) {
  const std::string cmd = std::string(TPS_MPIEXEC) + " -np " + std::to_string(ranks) + " " + args + " --json";
  auto r = run_tool(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

std::string tps(const std::string& mpirun_args, const std::string& preset, const std::string& args) {
  return mpirun_args + " " + tps::test_paths::tpsrun + " -q -m " + tps::test_paths::models + "/gpt-oss-" + preset +
         ".gguf " + args;
}

// A prompts file: one prompt a line.
void write_prompts(const std::string& path, const std::vector<std::string>& prompts) {
  std::ofstream out(path);
  for (const std::string& p : prompts) out << p << "\n";
}

struct Config {
  int ranks;
  std::string split, transport;
};

void expect_each_as_alone(const std::string& preset, const std::vector<Config>& configs) {
  SCOPED_TRACE(preset);
  const std::string greedy = "-n 12 --temp 0 --top-logprobs 5";
  std::vector<json> alone;
  for (const std::string& p : kPrompts) {
    alone.push_back(tpsrun(1, tps("", preset, "-p '" + p + "' " + greedy)));
    ASSERT_FALSE(alone.back().is_null());
  }
  const testing::ScopedTempPath prompts("prompts.txt");
  const std::string& file = prompts.path;
  write_prompts(file, kPrompts);
  for (const Config& c : configs) {
    SCOPED_TRACE(std::to_string(c.ranks) + " ranks, " + c.split + " split, " + c.transport);
    const std::string mpirun = c.transport == "mpi" ? "--mca btl self,tcp" : "";
    json got = tpsrun(c.ranks, tps(mpirun, preset,
                                   "--prompts-file " + file + " --parallel 2 --batch 16 " + greedy + " --split " +
                                       c.split + " --exchange " + c.transport));
    ASSERT_FALSE(got.is_null());
    ASSERT_EQ(got["sequences"].size(), kPrompts.size());
    EXPECT_GE(got["sequences"][2]["reused_prompt_tokens"].get<int>(), 32);  // the shared prefix
    // Every rank of several sends its share in the decode steps (sums, a
    // pipeline's hand-offs, the sampler's gathers), and says how much.
    ASSERT_EQ(got["per_rank"].size(), static_cast<size_t>(c.ranks));
    for (const json& rank : got["per_rank"])
      EXPECT_EQ(rank["decode_exchange_bytes"].get<double>() > 0, c.ranks > 1) << rank.dump();
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      const json& s = got["sequences"][i];
      EXPECT_EQ(s["generated_ids"], alone[i]["generated_ids"]) << "sequence " << i;
      EXPECT_EQ(s["prompt_tokens"], alone[i]["prompt_tokens"]) << "sequence " << i;
      EXPECT_EQ(s["logprobs"], alone[i]["logprobs"]) << "sequence " << i;
    }
  }
}

TEST(Parallel, EachSequenceAsAloneTiny) {
  expect_each_as_alone("tiny", {{1, "auto", "auto"},
                                {2, "tensor", "shm"},
                                {2, "experts", "shm"},
                                {2, "layers", "shm"},
                                {2, "tensor", "mpi"},
                                {2, "layers", "mpi"},
                                {3, "tensor", "shm"},
                                {3, "experts", "mpi"},
                                {3, "layers", "shm"}});
}

TEST(Parallel, EachSequenceAsAloneSmall) {
  expect_each_as_alone("small", {{1, "auto", "auto"}, {2, "tensor", "shm"}, {2, "layers", "shm"}});
}

// --cache-ram under splits: a pool of 4 blocks, which a story in between
// takes whole, loses the shared prefix of two questions; each rank's RAM
// tier keeps its share of the blocks and the second question gets them back
// (two whole blocks) instead of computing them, and every sequence draws
// what it draws alone on one rank with no tier, to the bit.
TEST(Parallel, TheRamTierRestoresAPrefixOnEverySplit) {
  const std::vector<std::string> prompts = {
      kShared + "what is the capital of France?",
      "Once upon a time, in a land far away, there lived a king who had three daughters and a dragon that guarded "
      "the gold of the mountain; every spring the river rose and the farmers planted barley in the black soil.",
      kShared + "how far is the moon?"};
  const std::string greedy = "-n 12 --temp 0 --top-logprobs 5";
  std::vector<json> alone;
  for (const std::string& p : prompts) {
    alone.push_back(tpsrun(1, tps("", "tiny", "-p '" + p + "' " + greedy)));
    ASSERT_FALSE(alone.back().is_null());
  }
  const testing::ScopedTempPath prompts_path("tier_prompts.txt");
  const std::string& file = prompts_path.path;
  write_prompts(file, prompts);
  const std::string base = "--prompts-file " + file + " --parallel 1 --kv-size 64 " + greedy;
  const json lost = tpsrun(1, tps("", "tiny", base));
  ASSERT_FALSE(lost.is_null());
  EXPECT_EQ(lost["sequences"][2]["reused_prompt_tokens"], 0);  // the pool alone lost the prefix
  for (const Config& c : std::vector<Config>{{1, "auto", "auto"}, {2, "tensor", "shm"}, {2, "layers", "shm"}}) {
    SCOPED_TRACE(std::to_string(c.ranks) + " ranks, " + c.split + " split");
    const json got =
        tpsrun(c.ranks, tps("", "tiny", base + " --cache-ram 1 --split " + c.split + " --exchange " + c.transport));
    ASSERT_FALSE(got.is_null());
    ASSERT_EQ(got["sequences"].size(), prompts.size());
    EXPECT_EQ(got["sequences"][2]["reused_prompt_tokens"], 32);
    EXPECT_EQ(got["sequences"][2]["restored_prompt_tokens"], 32);
    EXPECT_GE(got["prompt_cache"]["ram_saved_blocks"].get<int>(), 2) << got["prompt_cache"].dump();
    EXPECT_EQ(got["prompt_cache"]["ram_hits"], 1) << got["prompt_cache"].dump();
    double kept = 0;  // (split by layers, a rank may hold no layer of a kind)
    for (const json& rank : got["per_rank"]) {
      kept += rank["cache_ram_bytes"].get<double>();
      EXPECT_LE(rank["cache_ram_bytes"].get<double>(), 1 << 20) << rank.dump();  // the cap
    }
    EXPECT_GT(kept, 0);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got["sequences"][i]["generated_ids"], alone[i]["generated_ids"]) << "sequence " << i;
      EXPECT_EQ(got["sequences"][i]["logprobs"], alone[i]["logprobs"]) << "sequence " << i;
    }
  }
}

// --cache-dir on 2 ranks split by heads: a first run, whose pool of 4
// blocks a story takes whole, leaves the shared prefix's blocks in each
// rank's own files; a second run -- a restart -- loads them into every
// rank's RAM tier, and its question with that prefix gets both whole blocks
// back instead of computing them, drawing what it draws alone on one rank
// with no cache, to the bit.
TEST(Parallel, TheDiskTierRestoresAPrefixAfterARestartOnTwoRanks) {
  const std::string question = kShared + "how far is the moon?";
  const std::string greedy = "-n 12 --temp 0 --top-logprobs 5";
  const json alone = tpsrun(1, tps("", "tiny", "-p '" + question + "' " + greedy));
  ASSERT_FALSE(alone.is_null());
  const testing::ScopedTempPath prompts_path("disk_prompts.txt"), cache_dir("disk_cache");
  const std::string &file = prompts_path.path, &dir = cache_dir.path;
  {
    std::ofstream out(file);
    out << kShared << "what is the capital of France?\n"
        << "Once upon a time, in a land far away, there lived a king who had three daughters and a dragon that "
           "guarded the gold of the mountain; every spring the river rose and the farmers planted barley.\n";
  }
  const std::string tier =
      " --kv-size 64 --cache-ram 1 --cache-dir " + dir + " --split tensor --exchange shm " + greedy;
  const json first = tpsrun(2, tps("", "tiny", "--prompts-file " + file + " --parallel 1" + tier));
  ASSERT_FALSE(first.is_null());
  const json got = tpsrun(2, tps("", "tiny", "-p '" + question + "'" + tier));
  ASSERT_FALSE(got.is_null());
  EXPECT_EQ(got["sequences"][0]["reused_prompt_tokens"], 32);
  EXPECT_EQ(got["sequences"][0]["restored_prompt_tokens"], 32);
  for (const json& rank : got["per_rank"]) {
    EXPECT_GE(rank["cache_disk_loaded_blocks"].get<double>(), 2) << rank.dump();
    EXPECT_GT(rank["cache_disk_files"].get<double>(), 0) << rank.dump();
    EXPECT_EQ(rank["cache_disk_write_failures"].get<double>(), 0) << rank.dump();
  }
  EXPECT_EQ(got["generated_ids"], alone["generated_ids"]);
  EXPECT_EQ(got["logprobs"], alone["logprobs"]);
}

TEST(Parallel, SequenceIDrawsWithSeedPlusI) {
  json both = tpsrun(1, tps("", "tiny", "-p 'Tell me a story' --parallel 2 -n 12 --temp 1 --seed 40"));
  json second = tpsrun(1, tps("", "tiny", "-p 'Tell me a story' -n 12 --temp 1 --seed 41"));
  ASSERT_FALSE(both.is_null() || second.is_null());
  EXPECT_EQ(both["sequences"][1]["generated_ids"], second["generated_ids"]);
  EXPECT_NE(both["sequences"][0]["generated_ids"], both["sequences"][1]["generated_ids"]);
  // The step sizes say the two ran in shared steps: the prompt (4 tokens
  // each) in one step of 8, then steps of 2.
  EXPECT_EQ(both["step_tokens"]["8"], 1);
  EXPECT_EQ(both["step_tokens"]["2"], 11);
}

// Speculation on every split: a prompt that runs again after it ended
// drafts its text from the first run's (the others drafting what they can),
// and every sequence gets the tokens, log-probabilities and draws of one
// rank decoding without drafts -- free, sampled, and held to a schema.
TEST(Parallel, SpeculationGivesPlainDecodingsTokensOnEverySplit) {
  const testing::ScopedTempPath prompts("prompts.txt");
  write_prompts(prompts.path, {kPrompts[1], kPrompts[3], kPrompts[1], kPrompts[1]});
  const testing::ScopedTempPath schema("schema.json");
  std::ofstream(schema.path) << R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},)"
                                R"("required":["name","n"]})";
  for (const std::string& sampling : {std::string("--temp 0"), std::string("--temp 0.8 --top-k 40 --seed 3"),
                                      "--temp 0 --json-schema " + schema.path}) {
    SCOPED_TRACE(sampling);
    const std::string run =
        "--prompts-file " + prompts.path + " --parallel 2 --batch 16 -n 24 --top-logprobs 5 " + sampling;
    const json plain = tpsrun(1, tps("", "tiny", run + " --speculate off"));
    ASSERT_FALSE(plain.is_null());
    // Inside layers (tensor: experts runs the same loop) and a pipeline of
    // two and three stages (the picks sent back to rank 0).
    for (const Config& c :
         std::vector<Config>{{1, "auto", "shm"}, {2, "tensor", "shm"}, {2, "layers", "shm"}, {3, "layers", "shm"}}) {
      SCOPED_TRACE(std::to_string(c.ranks) + " ranks, " + c.split + " split");
      const json got = tpsrun(c.ranks, tps("", "tiny", run + " --speculate 8 --split " + c.split));
      ASSERT_FALSE(got.is_null());
      for (size_t i = 0; i < plain["sequences"].size(); ++i) {
        EXPECT_EQ(got["sequences"][i]["generated_ids"], plain["sequences"][i]["generated_ids"]) << "sequence " << i;
        EXPECT_EQ(got["sequences"][i]["logprobs"], plain["sequences"][i]["logprobs"]) << "sequence " << i;
      }
      if (sampling != "--temp 0.8 --top-k 40 --seed 3") {
        EXPECT_GT(got["speculation"]["taken_tokens"].get<int>(), 20) << got["speculation"];
      }
    }
  }
}

}  // namespace
}  // namespace tps
