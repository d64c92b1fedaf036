// The harmony chat format: prompts rendered as the spec's tokens, and the
// model's output followed channel by channel.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/text/generated_text.h"
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
    (step.message->channel == "final" ? final_text : analysis) += test_tokenizer().token_bytes(id);
  }
  EXPECT_EQ(final_text, "2 + 2 = 4.");
  EXPECT_EQ(analysis, "User asks.");
  EXPECT_TRUE(is_stop_token(harmony::kCall));
  EXPECT_FALSE(is_stop_token(harmony::kEnd));  // <|end|> ends a message, not the turn
}

// A model that ignores harmony (as synthetic weights do) still shows what
// it says: once a header runs past kMaxHeaderBytes, everything it said,
// but not the prompt's "assistant", is raw text, and so is what follows.
TEST(Harmony, OutputThatIsNotHarmonyIsShownRaw) {
  const std::string said(HarmonyStream::kMaxHeaderBytes, 'x');
  GeneratedText text(TextOptions{true, false});
  std::string shown;
  for (int32_t id : test_tokenizer().encode(said + " and more")) shown += text.accept(id, test_tokenizer());
  EXPECT_EQ(shown + text.flush(), said + " and more");
  // A harmony answer shows its final channel only.
  GeneratedText chat(TextOptions{true, false});
  shown.clear();
  for (int32_t id : test_tokenizer().encode("<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>final"
                                            "<|message|>Yes.",
                                            true))
    shown += chat.accept(id, test_tokenizer());
  EXPECT_EQ(shown + chat.flush(), "Yes.");
}

// A conversation with functions, as openai/harmony renders it (its test
// data test_render_functions_with_parameters, system and developer
// messages), then a tool call, its result and an earlier answer.
TEST(Harmony, ConversationWithFunctionsAsTheHarmonyLibraryRendersIt) {
  Conversation c;
  c.reasoning = "high", c.current_date = "2025-06-28", c.instructions = "Always respond in riddles";
  c.functions =
      "// Gets the location of the user.\ntype get_location = () => any;\n\n"
      "// Gets the current weather in the provided location.\ntype get_current_weather = (_: {\n"
      "// The city and state, e.g. San Francisco, CA\nlocation: string,\n"
      "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n";
  c.messages = {{"user", "", "", "", "What is the weather like in SF?"},
                {"assistant", "commentary", "functions.get_current_weather", "<|constrain|>json",
                 "{\"location\":\"San Francisco\"}"},
                {"functions.get_current_weather", "commentary", "assistant", "", "{\"sunny\": true}"}};
  const std::string want =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: high\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
      "Calls to these tools must go to the commentary channel: 'functions'.<|end|>"
      "<|start|>developer<|message|># Instructions\n\nAlways respond in riddles\n\n# Tools\n\n## functions\n\n"
      "namespace functions {\n\n// Gets the location of the user.\ntype get_location = () => any;\n\n"
      "// Gets the current weather in the provided location.\ntype get_current_weather = (_: {\n"
      "// The city and state, e.g. San Francisco, CA\nlocation: string,\n"
      "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n} // namespace functions<|end|>"
      "<|start|>user<|message|>What is the weather like in SF?<|end|>"
      "<|start|>assistant to=functions.get_current_weather<|channel|>commentary <|constrain|>json<|message|>"
      "{\"location\":\"San Francisco\"}<|call|>"
      "<|start|>functions.get_current_weather to=assistant<|channel|>commentary<|message|>{\"sunny\": true}<|end|>"
      "<|start|>assistant";
  const Ids ids = render_conversation(c, [](const std::string& s) { return test_tokenizer().encode(s); });
  EXPECT_EQ(test_tokenizer().decode(ids), want);
  // The frame is special tokens, the text never is.
  EXPECT_EQ(std::count(ids.begin(), ids.end(), harmony::kCall), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), harmony::kConstrain), 1);
  EXPECT_EQ(ids, test_tokenizer().encode(want, true));
}

// The model's tool call, with the recipient after the channel or in the
// role part, with or without <|constrain|>.
TEST(Harmony, StreamReadsToolCallHeaders) {
  struct Case {
    std::string text, channel, recipient, type;
  };
  for (const Case& k :
       std::vector<Case>{{"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>",
                          "commentary", "functions.get_weather", "<|constrain|>json"},
                         {" to=functions.get_weather<|channel|>commentary json<|message|>{}<|call|>", "commentary",
                          "functions.get_weather", "json"},
                         {"<|channel|>analysis to=functions.f<|constrain|>json<|message|>{}<|call|>", "analysis",
                          "functions.f", "<|constrain|>json"},
                         {"<|channel|>final<|message|>{}<|return|>", "final", "", ""}}) {
    SCOPED_TRACE(k.text);
    HarmonyStream stream;
    std::string content;
    const HarmonyStream::Header* header = nullptr;
    for (int32_t id : test_tokenizer().encode(k.text, true)) {
      HarmonyStream::Step step = stream.push(id, test_tokenizer().token_bytes(id));
      if (step.part == HarmonyStream::Part::content) header = step.message, content += test_tokenizer().token_bytes(id);
    }
    ASSERT_NE(header, nullptr);
    EXPECT_EQ(header->role, "assistant");
    EXPECT_EQ(header->channel, k.channel);
    EXPECT_EQ(header->recipient, k.recipient);
    EXPECT_EQ(header->content_type, k.type);
    EXPECT_EQ(content, "{}");
  }
}

}  // namespace
}  // namespace tps
