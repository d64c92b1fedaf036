// The harmony chat format: prompts rendered as the spec's tokens, and the
// model's output followed channel by channel.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/text/harmony.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using Ids = std::vector<int32_t>;
using testing::test_tokenizer;

TEST(Harmony, ChatPromptMatchesTheSpec) {
  // spec §6.3: the 64 tokens of the default system message + "What is 2 + 2?".
  Ids want{200006, 17360, 200008, 3575,  553,   17554,  162016, 11,    261,  4410,   6439,   2359,   22203,
           656,    7788,  17527,  558,   87447, 100594, 25,     220,   1323, 19,     12,     3218,   279,
           30377,  289,   25,     14093, 279,   2,      13888,  18403, 25,   8450,   11,     49159,  11,
           1721,   13,    21030,  2804,  413,   7360,   395,    1753,  3176, 13,     200007, 200006, 1428,
           200008, 4827,  382,    220,   17,    659,    220,    17,    30,   200007, 200006, 173781};
  Ids got = render_chat_prompt("What is 2 + 2?", ChatOptions{},
                               [](const std::string& s) { return test_tokenizer().encode(s); });
  EXPECT_EQ(got, want);
}

TEST(Harmony, StreamSeparatesChannels) {
  const std::string text =
      "<|channel|>analysis<|message|>User asks.<|end|><|start|>assistant<|channel|>final"
      "<|message|>2 + 2 = 4.<|return|>";
  std::string final_text, analysis;
  HarmonyStream stream;
  for (int32_t id : test_tokenizer().encode(text, true)) {
    if (is_stop_token(id)) break;
    HarmonyStream::Step step = stream.push(id, test_tokenizer().token_bytes(id));
    if (step.part != HarmonyStream::Part::content) continue;
    (step.channel == "final" ? final_text : analysis) += test_tokenizer().token_bytes(id);
  }
  EXPECT_EQ(final_text, "2 + 2 = 4.");
  EXPECT_EQ(analysis, "User asks.");
  EXPECT_TRUE(is_stop_token(harmony::kCall));
  EXPECT_FALSE(is_stop_token(harmony::kEnd));  // <|end|> ends a message, not the turn
}

}  // namespace
}  // namespace tps
