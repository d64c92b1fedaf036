// tpsrun as users run it: generation on the tiny model, JSON stats, chat,
// and bad input -- each a one-line error and exit code 2.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/temp_path.h"
#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using testing::run_tool;

std::string tpsrun(const std::string& args) {
  return std::string(tps::test_paths::tpsrun) + " -m " + tps::test_paths::models + "/gpt-oss-tiny.gguf " + args;
}

TEST(Tpsrun, GeneratesWithJsonStats) {
  auto r = run_tool(tpsrun("-p 'Hello, world!' -n 12 --temp 0 --json --top-logprobs 3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json::array({13225, 11, 2375, 0}));
  EXPECT_EQ(j["generated_tokens"].get<int>(), static_cast<int>(j["generated_ids"].size()));
  EXPECT_GE(j["generated_tokens"].get<int>(), 1);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["peak_rss_mib"].get<double>(), 0);
  ASSERT_EQ(j["logprobs"].size(), j["generated_ids"].size());
  // Greedy: each generated token is the most likely one.
  for (size_t i = 0; i < j["logprobs"].size(); ++i) EXPECT_EQ(j["logprobs"][i]["id"], j["logprobs"][i]["top"][0][0]);
}

TEST(Tpsrun, SameSeedSameText) {
  auto a = run_tool(tpsrun("-p 'Once upon' -n 16 --seed 7 --temp 0.8 --top-p 0.9 --json"));
  auto b = run_tool(tpsrun("-p 'Once upon' -n 16 --seed 7 --temp 0.8 --top-p 0.9 --json -t 1"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["generated_ids"], nlohmann::json::parse(b.out)["generated_ids"]);
}

TEST(Tpsrun, OneToken) {
  // The sequence ends in the step that admits it: the stop plan after it
  // must not name it (it crashed with map::at).
  auto r = run_tool(tpsrun("-p 'abc' -n 1 --temp 0 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["generated_ids"].size(), 1u);
}

TEST(Tpsrun, TextAndStatsLine) {
  auto r = run_tool(tpsrun("-p 'abc' -n 5 --temp 0"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("peak RSS"), std::string::npos) << r.err;
}

TEST(Tpsrun, ChatRendersHarmony) {
  auto r = run_tool(tpsrun("--chat -p 'What is 2 + 2?' -n 4 --temp 0 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ids = nlohmann::json::parse(r.out)["prompt_ids"];
  ASSERT_EQ(ids.size(), 64u);  // spec §6.3
  EXPECT_EQ(ids.back(), 173781);
}

void expect_bad_input(const std::string& args, const std::string& fragment) {
  auto r = run_tool(tpsrun(args));
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << args << "\n" << r.err;
}

TEST(Tpsrun, BadInputIsAClearError) {
  expect_bad_input("-p x --temp -1", "--temp -1: expected a temperature >= 0");
  expect_bad_input("-p x --top-p 0", "--top-p 0: expected a value in (0, 1]");
  expect_bad_input("-p x --top-p 1.5", "--top-p 1.5");
  expect_bad_input("-p x --min-p 1", "--min-p 1");
  expect_bad_input("-p x --top-k -3", "--top-k -3");
  expect_bad_input("", "give a prompt with -p PROMPT");
  expect_bad_input("-p ''", "--prompt: got an empty value");
  expect_bad_input("-p 'one two three four five six seven eight' --ctx 4", "longer than the context of 4");
  // Typed options name what they take from the one list of names there is.
  expect_bad_input("-p x --split diagonal", "--split: 'diagonal': expected auto, layers, experts or tensor");
  expect_bad_input("-p x --kv-type q4_1", "--kv-type: 'q4_1': expected f32, f16, bf16, q8_0 or q4_0");
  expect_bad_input("-p x --quantize attn=q9", "'q9' is not a type tps quantizes to (expected one of q8_0");
  expect_bad_input("-p x --ctx 1000000", "--ctx 1000000: more than the model's context length of 131072");
  expect_bad_input("-p x --cache-ram 0 --cache-dir /tmp/x", "--cache-dir /tmp/x with --cache-ram 0: the disk tier");
  expect_bad_input("-p x --no-prefix-cache --cache-dir /tmp/x", "does nothing with --no-prefix-cache");
  // A step of 2^31 - 1 tokens: its sizes counted in 64 bits (they wrapped,
  // to a KV cache of "16777215.8 TiB", and --ctx was named), past what a
  // pool counts; of 10^8, past the rank's memory; --batch named each time.
  expect_bad_input("-p x --batch 2147483647", "--batch 2147483647 with --parallel 1: the sliding-window layers");
  expect_bad_input("-p x --batch 100000000", "or --batch (100000000)");  // past the rank's memory
  for (const std::string batch : {"2147483647", "100000000"}) {
    auto huge = run_tool(tpsrun("-p x --batch " + batch));
    EXPECT_EQ(huge.err.find("16777215"), std::string::npos) << huge.err;
  }
  auto r = run_tool(std::string(tps::test_paths::tpsrun) + " -m /no/such.gguf -p x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/no/such.gguf: cannot open"), std::string::npos) << r.err;
}

// Each mode takes the groups of options it uses (launch/run_options.h) and
// refuses the others, naming the option and the mode; an option of a group
// it uses is never refused so. (The allowed runs fail on the missing model.)
// --cache-dir alone: a RAM tier of its default size (said at start), and
// the pool's blocks on disk at the end, loaded back by the next run.
TEST(Tpsrun, CacheDirAloneGetsADefaultRamTier) {
  const std::string dir = testing::temp_path("tpsrun-cache-dir");
  std::filesystem::remove_all(dir);
  const std::string prompt =
      "The disk tier keeps the blocks of this prompt, which is long enough to fill a few of "
      "them, for the next run of the same model to load back into its RAM tier at start.";
  const std::string run = tpsrun("-p '" + prompt + "' -n 2 --temp 0 --cache-dir " + dir);
  auto first = run_tool(run);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("prompt cache RAM tier (for --cache-dir, a quarter of what the rank's memory leaves"),
            std::string::npos)
      << first.err;
  EXPECT_FALSE(std::filesystem::is_empty(dir));
  auto again = run_tool(run);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err.find(" 0 blocks loaded"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find(" blocks loaded into the RAM tier"), std::string::npos) << again.err;
  std::filesystem::remove_all(dir);
}

TEST(Tpsrun, EachModeRefusesTheOptionsItDoesNotUse) {
  const std::vector<std::pair<std::string, std::string>> groups = {{"model", "--ctx 64"},
                                                                   {"sequences", "--parallel 2"},
                                                                   {"prefix", "--no-prefix-cache"},
                                                                   {"sampling", "--temp 0"},
                                                                   {"prompt", "--chat"},
                                                                   {"chat_format", "--reasoning low"},
                                                                   {"output", "--json"},
                                                                   {"logprobs", "--top-logprobs 1"}};
  struct Mode {
    std::string args, said;
    std::vector<std::string> uses;
  };
  const std::vector<Mode> modes = {
      {"place", "with `tpsrun place`", {}},
      {"score --ids /no/such.ids", "with `tpsrun score`", {"model", "output", "logprobs"}},
      {"perplexity -f /no/such.txt", "with `tpsrun perplexity`", {"model", "output"}},
      {"serve --port 0", "with `tpsrun serve`", {"model", "sequences", "prefix"}},
      {"chat", "with `tpsrun chat`", {"model", "prefix", "sampling", "chat_format"}},
      {"-p x", "without --chat", {"model", "sequences", "prefix", "sampling", "prompt", "output", "logprobs"}}};
  for (const Mode& mode : modes)
    for (const auto& [group, option] : groups) {
      const bool uses = std::find(mode.uses.begin(), mode.uses.end(), group) != mode.uses.end();
      const std::string model = mode.args == "place" ? "" : " -m /no/such.gguf";
      const std::string args = model + " " + option + " " + mode.args;
      auto r = run_tool(std::string(tps::test_paths::tpsrun) + args);
      EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
      const std::string flag = option.substr(0, option.find(' '));
      EXPECT_EQ(r.err.find(flag + " does nothing " + mode.said) != std::string::npos, !uses) << args << "\n" << r.err;
    }
}

// A split model with a part missing, or opened by another part than its
// first: one line naming the part, exit code 2.
TEST(Tpsrun, SplitModelPartsAreChecked) {
  const std::string dir = ::testing::TempDir() + "/tps-split-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string models = tps::test_paths::models, name = "/gpt-oss-tiny-split-0000";
  std::filesystem::copy_file(models + name + "1-of-00003.gguf", dir + name + "1-of-00003.gguf");
  std::filesystem::copy_file(models + name + "3-of-00003.gguf", dir + name + "3-of-00003.gguf");
  auto r = run_tool(std::string(tps::test_paths::tpsrun) + " -q -m " + dir + name + "1-of-00003.gguf -p x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("part 2 of 3 of this split model is missing: " + dir + name + "2-of-00003.gguf"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = run_tool(std::string(tps::test_paths::tpsrun) + " -m " + models + name + "3-of-00003.gguf -p x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("this is part 3 of 3 of a split model: open its first part"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// A top-k past the vocabulary is the whole vocabulary, at its cost (it
// once gathered k candidates a token: 25 s a token at 10^9).
TEST(Tpsrun, TopKPastTheVocabularyIsTheVocabulary) {
  const auto t0 = std::chrono::steady_clock::now();
  auto huge = run_tool(tpsrun("-p 'Once upon' -n 4 --seed 3 --temp 1 --top-k 1000000000 --json"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto vocab = run_tool(tpsrun("-p 'Once upon' -n 4 --seed 3 --temp 1 --top-k 201088 --json"));
  ASSERT_EQ(huge.exit_code, 0) << huge.err;
  ASSERT_EQ(vocab.exit_code, 0) << vocab.err;
  EXPECT_EQ(nlohmann::json::parse(huge.out)["generated_ids"], nlohmann::json::parse(vocab.out)["generated_ids"]);
  EXPECT_LT(seconds, 20) << "4 tokens of the tiny model";
}

// A file of n token ids of the vocabulary, in the temporary directory.
std::string ids_file(const std::string& name, int n) {
  const std::string path = ::testing::TempDir() + "tps-" + std::to_string(getpid()) + "-" + name;
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) out << (i * 7919) % 200000 << ' ';
  return path;
}

TEST(Tpsrun, ScoreHonoursCtx) {
  const std::string ids = ids_file("score-40.txt", 40);
  auto refused = run_tool(tpsrun("-q score --ids " + ids + " --ctx 16"));
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("tpsrun: --ctx 16: " + ids + " has 40 tokens, more than the context"), std::string::npos)
      << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  auto fits = run_tool(tpsrun("score --json --ids " + ids + " --ctx 40"));
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(nlohmann::json::parse(fits.out)["positions"].size(), 39u);
  std::remove(ids.c_str());
}

TEST(Tpsrun, ScoreKeepsOnlyAStepOfLogits) {
  // 600 positions of the tiny model's 201,088 logits are 482 MB: every
  // position's at once (as score kept them) does not fit 700 MB of address
  // space; a step's (64 positions: 51 MB) does.
  const std::string ids = ids_file("score-600.txt", 600);
  auto r = run_tool("sh -c 'ulimit -v 700000; exec " + tpsrun("score --json --batch 64 --ids " + ids) + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["positions"].size(), 599u);
  std::remove(ids.c_str());
}

// Output that cannot be written -- a full disk, a closed standard output,
// a reader gone -- ends the run non-zero with one line, under mpirun too,
// where mpirun wrote the output on and lost it with exit 0.
TEST(Tpsrun, LostOutputIsAnErrorUnderMpirunToo) {
  const std::string mpirun = std::string(TPS_MPIEXEC) + " -q -np 2 ";
  const std::string run = tpsrun("-q -p 'Once upon a time' -n 200 --temp 0");
  for (const std::string& launcher : {std::string(), mpirun})
    for (const auto& [command, reason] :
         {std::pair{launcher + run + " > /dev/full", std::string("No space left on device")},
          std::pair{launcher + run + " >&-", std::string("Bad file descriptor")},
          std::pair{"bash -c \"set -o pipefail; " + launcher + run + " | head -c1 > /dev/null\"",
                    std::string("Broken pipe")}}) {
      auto r = run_tool(command);
      EXPECT_NE(r.exit_code, 0) << command << ": " << r.err;
      EXPECT_NE(r.err.find("standard output: " + reason), std::string::npos) << command << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << command << ": " << r.err;
    }
  // Written where mpirun's own output goes: after what was there (>>).
  const std::string file = ::testing::TempDir() + "tps-" + std::to_string(getpid()) + "-out.txt";
  std::ofstream(file) << "before\n";
  auto r = run_tool(mpirun + tpsrun("-q -p 'Once upon a time' -n 4 --temp 0 --json") + " >> " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(file);
  std::string first, second;
  std::getline(in, first), std::getline(in, second);
  EXPECT_EQ(first, "before");
  EXPECT_EQ(nlohmann::json::parse(second)["generated_ids"].size(), 4u);
  std::remove(file.c_str());
}

// -f FILE: the whole file is the prompt, its bytes as they are (no line
// splitting, the last newline kept): the same tokens as -p with that text,
// from a file and from standard input (-f -), on one rank and under
// mpirun, where rank 0 alone has the standard input.
TEST(Tpsrun, PromptFromAFileIsTheSameAsP) {
  const std::string text = "First line, <|start|>user\n\n  second\tline\n";
  testing::ScopedTempPath file("prompt.txt");
  std::ofstream(file.path, std::ios::binary) << text;
  const std::string mpirun = std::string(TPS_MPIEXEC) + " -q -np 2 ";
  const std::string rest = " -q -n 4 --temp 0 --json";
  auto p = run_tool(tpsrun("-p '" + text + "'" + rest));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const nlohmann::json want = nlohmann::json::parse(p.out);
  ASSERT_EQ(want["prompt_ids"].back(), 198) << want["prompt_ids"];  // "\n": the last newline is the prompt's
  for (const std::string& command :
       {tpsrun("-f " + file.path + rest), tpsrun("--file - " + rest) + " < " + file.path,
        mpirun + tpsrun("-f " + file.path + rest), mpirun + tpsrun("-f -" + rest) + " < " + file.path}) {
    auto r = run_tool(command);
    ASSERT_EQ(r.exit_code, 0) << command << ": " << r.err;
    const nlohmann::json got = nlohmann::json::parse(r.out);
    EXPECT_EQ(got["prompt_ids"], want["prompt_ids"]) << command;
    EXPECT_EQ(got["generated_ids"], want["generated_ids"]) << command;
  }
}

// What -p cannot take: a prompt past the 128 KiB one argument may have
// reaches the tokenizer whole (and is then past the context).
TEST(Tpsrun, PromptFileTakesWhatACommandLineCannot) {
  testing::ScopedTempPath file("long-prompt.txt");
  std::string text;
  while (text.size() < 200 * 1024) text += "hello ";
  std::ofstream(file.path) << text;
  auto r = run_tool(tpsrun("-q -n 1 -f " + file.path));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("longer than the context of 4096"), std::string::npos) << r.err;
}

// A file that cannot be the prompt is one line naming it and the problem,
// exit 2, on one rank and under mpirun; -f with -p or --prompts-file is
// refused naming both flags.
TEST(Tpsrun, BadPromptFileIsOneLine) {
  testing::ScopedTempPath dir("prompt-dir"), fifo("prompt-fifo"), empty("prompt-empty");
  std::filesystem::create_directory(dir.path);
  ASSERT_EQ(mkfifo(fifo.path.c_str(), 0600), 0);
  std::ofstream(empty.path).flush();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-f /no/such/prompt.txt", "/no/such/prompt.txt: cannot open: No such file or directory"},
      {"-f " + dir.path, dir.path + ": cannot read: Is a directory"},
      {"-f " + empty.path, empty.path + ": empty, no prompt"},
      {"-f " + fifo.path, fifo.path + ": empty, no prompt"},  // no writer: not waited for
      {"-f /dev/zero", "/dev/zero: more than the 64 MiB a prompt file may have"},
      {"-f - < /dev/null", "standard input: empty, no prompt"},
      {"-f " + empty.path + " -p x", "--prompt excludes --file"},
      {"-p x -f " + empty.path, "--prompt excludes --file"},
      {"-f " + empty.path + " --prompts-file " + empty.path, "--file excludes --prompts-file"},
  };
  const std::string mpirun = std::string(TPS_MPIEXEC) + " -q -np 2 ";
  for (const std::string& launcher : {std::string(), mpirun})
    for (const auto& [args, said] : cases) {
      // The redirection is the shell's: after the whole command.
      const size_t redirect = args.find(" <");
      const std::string command = launcher + tpsrun("-q -n 1 " + args.substr(0, redirect)) +
                                  (redirect == std::string::npos ? "" : args.substr(redirect));
      auto r = run_tool(command);
      EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
      EXPECT_NE(r.err.find(said), std::string::npos) << command << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << command << ": " << r.err;
    }
}

TEST(Tpsrun, ScoreNeedsIds) {
  auto r = run_tool(tpsrun("score --ids /no/ids.txt"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/no/ids.txt: cannot open: No such file or directory"), std::string::npos) << r.err;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = testing::temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// The random-weight model never writes JSON by itself: each answer that
// parses and has the schema's shape was held to it, raw and as a chat's
// final message; a GBNF grammar likewise.
TEST(Tpsrun, JsonSchemaAndGrammarHoldTheText) {
  const std::string schema = write_file("form.json", R"({"type": "object", "additionalProperties": false,
    "required": ["ok", "n", "color"], "properties": {"ok": {"type": "boolean"},
    "n": {"type": "integer", "minimum": -5, "maximum": 99}, "color": {"enum": ["red", "green", "blue"]}}})");
  for (const std::string mode : {"", "--chat --reasoning low "})
    for (int seed = 1; seed <= 3; ++seed) {
      auto r = run_tool(tpsrun(mode + "-p 'Fill the form' -n 200 --temp 1 --seed " + std::to_string(seed) +
                               " --json --json-schema " + schema));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const std::string text = nlohmann::json::parse(r.out)["text"];
      const auto answer = nlohmann::json::parse(text, nullptr, false);
      ASSERT_TRUE(answer.is_object()) << mode << seed << ": " << text;
      EXPECT_EQ(answer.size(), 3u) << text;
      EXPECT_TRUE(answer["ok"].is_boolean()) << text;
      EXPECT_TRUE(answer["n"].is_number_integer() && answer["n"] >= -5 && answer["n"] <= 99) << text;
      EXPECT_TRUE(answer["color"] == "red" || answer["color"] == "green" || answer["color"] == "blue") << text;
    }
  const std::string grammar =
      write_file("answer.gbnf", "root ::= \"answer: \" (\"yes\" | \"no\") \" (\" [0-9]{1,2} \"%)\"\n");
  auto g = run_tool(tpsrun("-p 'Q' -n 40 --temp 1 --seed 2 --json --grammar " + grammar));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const std::string text = nlohmann::json::parse(g.out)["text"];
  EXPECT_TRUE(text.starts_with("answer: yes (") || text.starts_with("answer: no (")) << text;
  EXPECT_TRUE(text.ends_with("%)")) << text;
  // What cannot be honoured: one line naming the flag, the file and why.
  const std::string bad_schema = write_file("bad.json", R"({"type": "object", "not": {}})");
  const std::string bad_grammar = write_file("bad.gbnf", "root ::= \"a\" b\n");
  const std::string not_json = write_file("not.json", "{\"type\": ");
  for (const auto& [args, words] : std::vector<std::pair<std::string, std::string>>{
           {"--json-schema " + bad_schema, "bad.json: schema at /: 'not' is not supported"},
           {"--grammar " + bad_grammar, "bad.gbnf: line 1: rule 'b' is used but never defined"},
           {"--json-schema " + not_json, "not.json: not JSON"},
           {"--json-schema " + schema + " --grammar " + grammar, "excludes"}}) {
    auto r = run_tool(tpsrun("-p x -n 4 " + args));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  }
  for (const std::string& f : {schema, grammar, bad_schema, bad_grammar, not_json}) std::filesystem::remove(f);
}

// tpsrun sweep: a row a depth, the cache growing by a chunk and the decoded
// tokens each time, the KV bytes a token reads growing with it.
TEST(Tpsrun, SweepMeasuresEachDepth) {
  auto r = run_tool(tpsrun("sweep --ctx 320 --batch 64 --tg 4 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const auto& row = j["rows"][i];
    EXPECT_EQ(row["n_kv"], 68 * i);
    EXPECT_EQ(row["pp_tokens"], 64);
    EXPECT_EQ(row["tg_tokens"], 4);
    EXPECT_GT(row["pp_tokens_per_s"].get<double>(), 0);
    EXPECT_GT(row["tg_tokens_per_s"].get<double>(), 0);
    EXPECT_GE(row["attention_share"].get<double>(), 0);
    EXPECT_LE(row["attention_share"].get<double>(), 1);
    if (i > 0) {
      EXPECT_GT(row["kv_mib_per_token"].get<double>(), j["rows"][i - 1]["kv_mib_per_token"].get<double>());
    }
    // Meanwhile, a line a depth on stderr.
    EXPECT_NE(r.err.find("tpsrun: sweep: depth " + std::to_string(68 * i) + ": decode "), std::string::npos) << r.err;
  }
  auto small = run_tool(tpsrun("sweep --ctx 64 --batch 64"));
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_NE(small.err.find("--ctx 64: a sweep needs room"), std::string::npos) << small.err;
}

// tpsrun replay: a transcript's assistant turns decoded as forced tokens.
// Without drafts a token a step; with them every drafted token taken is a
// step saved (a turn that repeats the tool's output drafts from it), the
// same tokens decoded either way.
TEST(Tpsrun, ReplayDecodesATranscriptsTurns) {
  const std::string file = "def area(width, height):\n    return width * height\n\nprint(area(3, 4))\n";
  const nlohmann::json body = {
      {"model", "gpt-oss-20b"},
      {"tools",
       {{{"type", "function"},
         {"function",
          {{"name", "read_file"},
           {"parameters",
            {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}, {"required", {"path"}}}}}}}}},
      {"messages",
       {{{"role", "user"}, {"content", "What does geometry.py print?"}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          {{{"id", "c1"},
            {"type", "function"},
            {"function", {{"name", "read_file"}, {"arguments", "{\"path\": \"geometry.py\"}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", file}},
        {{"role", "assistant"}, {"content", "It defines\n\n" + file + "\nand prints 12."}}}}};
  const testing::ScopedTempPath transcript("transcript.json");
  std::ofstream(transcript.path) << body.dump();
  auto off = run_tool(tpsrun("replay --transcript " + transcript.path + " --speculate off --json"));
  auto on = run_tool(tpsrun("replay --transcript " + transcript.path + " --speculate 8 --json"));
  ASSERT_EQ(off.exit_code, 0) << off.err;
  ASSERT_EQ(on.exit_code, 0) << on.err;
  const auto a = nlohmann::json::parse(off.out), b = nlohmann::json::parse(on.out);
  EXPECT_EQ(a["turns"], 2);
  EXPECT_GT(a["decode_tokens"].get<int>(), 40);
  EXPECT_EQ(a["decode_steps"], a["decode_tokens"]);
  EXPECT_EQ(a["taken_tokens"], 0);
  EXPECT_EQ(b["decode_tokens"], a["decode_tokens"]);
  EXPECT_GT(b["taken_tokens"].get<int>(), 10) << b.dump();
  EXPECT_EQ(b["decode_steps"].get<int>() + b["taken_tokens"].get<int>(), b["decode_tokens"].get<int>()) << b.dump();
  EXPECT_FALSE(b["verify_cost"].empty());
  // Bad transcripts: one line naming the file and what is wrong.
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not a Chat Completions request body"},
           {R"({"messages": "hi"})", "'messages'"},
           {R"({"messages": [{"role": "user", "content": "hi"}]})", "no assistant turn to replay"}}) {
    std::ofstream(transcript.path) << text;
    auto r = run_tool(tpsrun("-q replay --transcript " + transcript.path));
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_NE(r.err.find(transcript.path + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace tps
