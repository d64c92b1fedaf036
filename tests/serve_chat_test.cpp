// The chat API without a network: requests read and refused by name, and
// answers built from generated tokens (channels, tool calls, stop strings,
// raw output, log-probabilities).
#include <gtest/gtest.h>

#include "runtime/error.h"
#include "serve/chat/chat_request.h"
#include "serve/chat/chat_response.h"
#include "serve/chat/chat_text.h"
#include "serve/http/api_error.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using json = nlohmann::ordered_json;
using testing::test_tokenizer;

const ApiLimits kLimits{"gpt-oss-test", 256};

void expect_refused(const std::string& body, int status, const std::string& param, const std::string& fragment) {
  try {
    parse_chat_request(json::parse(body), kLimits);
    ADD_FAILURE() << "accepted: " << body;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, status) << body;
    EXPECT_EQ(e.param, param) << body;
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(e.body()["error"]["message"], e.what());
  }
}

TEST(ApiRequest, RefusesWhatIsWrongByName) {
  expect_refused(R"({"model": "gpt-oss-test"})", 400, "messages", "'messages' is missing");
  expect_refused(R"({"messages": []})", 400, "messages", "non-empty");
  expect_refused(R"({"messages": [{"role": "wizard", "content": "x"}]})", 400, "messages[0].role", "'wizard'");
  expect_refused(R"({"messages": [{"content": "x"}]})", 400, "messages[0]", "'role'");
  expect_refused(R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})", 404, "model",
                 "does not exist");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", 400, "temperature",
                 "must be a number");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", 400, "temperature",
                 "expected 0 to 2");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", 400, "n", "");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", 400, "max_tokens", "");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", 400, "top_logprobs",
                 "needs 'logprobs'");
  expect_refused(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400, "messages[0].content",
                 "only text");
  expect_refused(R"({"messages": [{"role": "tool", "content": "42"}]})", 400, "messages[0]", "no earlier tool call");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", 400, "stop", "");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"})", 400,
                 "reasoning_effort", "'max'");
  expect_refused(R"([1, 2])", 400, "", "JSON object");
  // Members of another type are refused by name, never a type_error (a 500;
  // found by tests/fuzz/request_fuzz.cpp): a role that is an object, a content
  // part whose type is a number, a tool whose type is a list.
  expect_refused(R"({"messages": [{"role": "user", "content": "w"}, {"role": {"name": "f"}}]})", 400, "messages[1]",
                 "'role'");
  expect_refused(R"({"messages": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]})", 400,
                 "messages[0].content", "only text");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": [1]}]})", 400, "tools", "");
}

// Fields that would change the answer were taken and ignored: tool_choice
// "required" acted as "auto", response_format json_schema gave free text.
// Each is honoured (OutputConstraint below) or refused by name with its value.
TEST(ApiRequest, FieldsNotHonouredAreRefusedByName) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function",
      "function": {"name": "add"}}], )";
  expect_refused(chat + R"("tool_choice": "sometimes"})", 400, "tool_choice", "not auto, none, required");
  expect_refused(chat + R"("tool_choice": {"type": "function", "function": {"name": "sub"}}})", 400, "tool_choice",
                 "'sub', which 'tools' does not offer");
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", 400, "tool_choice",
                 "'tools' offers none");
  expect_refused(chat + R"("response_format": {"type": "yaml"}})", 400, "response_format.type", "'yaml'");
  expect_refused(chat + R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})", 400,
                 "response_format.json_schema.schema", "must be a JSON Schema");
  expect_refused(chat + R"("frequency_penalty": 0.5})", 400, "frequency_penalty", "0.5 is not supported");
  expect_refused(chat + R"("logit_bias": {"13": 5}})", 400, "logit_bias", R"({"13":5})");
  expect_refused(chat + R"("functions": [{"name": "add"}]})", 400, "functions", "deprecated");
  expect_refused(chat + R"("parallel_tool_calls": "yes"})", 400, "parallel_tool_calls", "true or false");
  // What is honoured: none offers no functions; text output; no-op values.
  const ChatRequest none = parse_chat_request(
      json::parse(chat + R"("tool_choice": "none", "response_format": {"type": "text"}, "presence_penalty": 0,
          "logit_bias": {}, "parallel_tool_calls": false})"),
      kLimits);
  EXPECT_FALSE(none.tools);
  EXPECT_EQ(none.conversation.functions, "");
  EXPECT_TRUE(parse_chat_request(json::parse(chat + R"("tool_choice": "auto"})"), kLimits).tools);
  for (const char* field : {R"("echo": true)", R"("suffix": "end")", R"("best_of": 3)"}) {
    try {
      parse_completion_request(json::parse(cat(R"({"prompt": "x", )", field, "}")), kLimits);
      ADD_FAILURE() << "accepted: " << field;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_NE(std::string(field).find(e.param), std::string::npos) << e.what();
    }
  }
}

// Text longer than the context's positions times the longest token cannot
// fit: refused by its size, before tokenizing (linear in it: seconds for MBs).
TEST(ApiRequest, TextPastWhatTheContextHoldsIsRefusedBeforeTokenizing) {
  const std::string long_text(kLimits.prompt_bytes() + 1, 'x');
  expect_refused(json{{"messages", {{{"role", "user"}, {"content", long_text}}}}}.dump(), 400, "messages",
                 "the context holds 256 tokens");
  try {
    parse_completion_request(json{{"prompt", long_text}}, kLimits);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "prompt");
    EXPECT_EQ(e.code, "context_length_exceeded");
  }
  const std::string fits(kLimits.prompt_bytes() / 2, 'x');
  EXPECT_NO_THROW(parse_chat_request(json{{"messages", {{{"role", "user"}, {"content", fits}}}}}, kLimits));
}

TEST(ApiRequest, RendersTheConversationAsHarmonyKeepsIt) {
  const ChatRequest r = parse_chat_request(json::parse(R"({
    "model": "gpt-oss-test", "reasoning_effort": "high", "max_tokens": 10, "stop": "END",
    "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
               "properties": {"a": {"type": "number"}}, "required": ["a"]}}}],
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "hello", "reasoning_content": "an old thought"},
      {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
      {"role": "user", "content": "add 1"},
      {"role": "assistant", "content": null, "reasoning_content": "need add",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "1"}]})"),
                                           kLimits);
  EXPECT_EQ(r.max_new_tokens, 10);
  // Past the context: the context (and then the room the prompt leaves, Server::submit).
  EXPECT_EQ(parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 100000})"),
                               kLimits)
                .max_new_tokens,
            256);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.tools);
  const Conversation& c = r.conversation;
  EXPECT_EQ(c.reasoning, "high");
  EXPECT_EQ(c.instructions, "Be brief.\n\nUse tools.");
  EXPECT_EQ(c.functions, "type add = (_: {\na: number,\n}) => any;\n\n");
  ASSERT_EQ(c.messages.size(), 6u);  // the earlier turn's reasoning is dropped, the ongoing one's kept
  EXPECT_EQ(c.messages[1].channel, "final");
  EXPECT_EQ(c.messages[1].content, "hello");
  EXPECT_EQ(c.messages[3].channel, "analysis");
  EXPECT_EQ(c.messages[3].content, "need add");
  EXPECT_EQ(c.messages[4].recipient, "functions.add");
  EXPECT_EQ(c.messages[4].content_type, "<|constrain|>json");
  EXPECT_EQ(c.messages[4].content, "{\"a\":1}");
  EXPECT_EQ(c.messages[5].role, "functions.add");
  EXPECT_EQ(c.messages[5].recipient, "assistant");
}

// The picks of a text's tokens (special tokens parsed), log-probabilities made up.
std::vector<Pick> picks(const std::string& text) {
  std::vector<Pick> out;
  for (int32_t id : test_tokenizer().encode(text, true)) {
    Pick p;
    p.id = id, p.logprob = -0.5f, p.n_top = 2;
    p.top[0] = {id, -0.5f}, p.top[1] = {13, -1.5f};
    out.push_back(p);
  }
  return out;
}

// Feeds the text's tokens; returns what the deltas said, concatenated.
std::string stream(ChatText& rt, const std::string& text) {
  std::string said;
  for (const Pick& p : picks(text)) {
    const ChatText::Delta d = rt.push(p);
    said += d.content;
  }
  return said + rt.finish().content;
}

TEST(ResponseText, ChannelsBecomeReasoningAndContent) {
  ChatText rt(test_tokenizer(), true, {}, 1, "call_");
  const std::string said = stream(rt,
                                  "<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>"
                                  "final<|message|>Hello, world!<|return|>");
  EXPECT_EQ(rt.reasoning(), "User says hi.");
  EXPECT_EQ(rt.content(), "Hello, world!");
  EXPECT_EQ(said, "Hello, world!");
  EXPECT_TRUE(rt.tool_calls().empty());
  EXPECT_GT(rt.reasoning_tokens(), 0);
  // Log-probabilities of the content tokens only, with the top 1 asked for.
  ASSERT_EQ(rt.logprobs().size(), test_tokenizer().encode("Hello, world!").size());
  EXPECT_EQ(rt.logprobs()[0]["top_logprobs"].size(), 1u);
  EXPECT_EQ(rt.logprobs()[0]["token"], "Hello");
}

TEST(ResponseText, AMessageToAFunctionIsAToolCall) {
  ChatText rt(test_tokenizer(), true, {}, -1, "call_x_");
  stream(rt,
         "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>");
  ASSERT_EQ(rt.tool_calls().size(), 1u);
  EXPECT_EQ(rt.tool_calls()[0].name, "get_weather");
  EXPECT_EQ(rt.tool_calls()[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(rt.tool_calls()[0].id, "call_x_0");
  EXPECT_EQ(rt.content(), "");
}

// The OpenAI shapes: a body's message with its tool call, and a stream whose
// chunks, put together, say the same, ending with the finish reason, the
// usage chunk and [DONE].
TEST(ApiResponse, BodiesAndStreamsSayTheSame) {
  const std::string text =
      "<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
  const ChatResponse shape("chatcmpl-1", 7, "gpt-oss-test", true, false, true);
  ChatText whole(test_tokenizer(), true, {}, -1, "call_1_");
  stream(whole, text);
  const json body = shape.body(whole, "tool_calls", usage_json(5, 9, 2, 3));
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "Need it.");
  EXPECT_EQ(body["usage"]["total_tokens"], 14);
  ChatText streamed(test_tokenizer(), true, {}, -1, "call_1_");
  std::string events = shape.first_event();
  for (const Pick& p : picks(text)) events += shape.delta_events(streamed, streamed.push(p));
  events += shape.delta_events(streamed, streamed.finish()) + shape.last_events("tool_calls", usage_json(5, 9, 2, 3));
  std::string reasoning, arguments, finish;
  json usage;
  size_t at = 0;
  for (size_t next; (next = events.find("\n\n", at)) != std::string::npos; at = next + 2) {
    const std::string event = events.substr(at, next - at);
    ASSERT_TRUE(event.starts_with("data: ")) << event;
    if (event == "data: [DONE]") break;
    const json c = json::parse(event.substr(6));
    EXPECT_EQ(c["id"], "chatcmpl-1");
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    if (!c["usage"].is_null()) usage = c["usage"];
    for (const json& choice : c["choices"]) {
      reasoning += choice["delta"].value("reasoning_content", "");
      for (const json& call : choice["delta"].value("tool_calls", json::array()))
        arguments += call["function"].value("arguments", "");
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_TRUE(events.ends_with("data: [DONE]\n\n"));
  EXPECT_EQ(reasoning, "Need it.");
  EXPECT_EQ(arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(usage["completion_tokens"], 9);
}

TEST(ResponseText, StopStringsEndTheContentAndAreHeldBackUntilSure) {
  ChatText rt(test_tokenizer(), false, {"world", "zzz"}, -1, "");
  const std::vector<Pick> ps = picks("Hello, world! More.");
  std::string said;
  for (const Pick& p : ps) said += rt.push(p).content;
  EXPECT_TRUE(rt.stopped());
  EXPECT_EQ(rt.content(), "Hello, ");
  EXPECT_EQ(said, "Hello, ");
  // Text that only looked like a stop's start comes out in the end.
  ChatText partial(test_tokenizer(), false, {"wor!"}, -1, "");
  EXPECT_EQ(stream(partial, "Hello, wor"), "Hello, wor");
  EXPECT_FALSE(partial.stopped());
}

TEST(ResponseText, OutputThatIsNotHarmonyBecomesRawText) {
  ChatText rt(test_tokenizer(), true, {}, -1, "");
  const std::string text(200, 'x');
  const std::string said = stream(rt, text);
  EXPECT_EQ(rt.content(), text);
  EXPECT_EQ(said, text);
}

}  // namespace
}  // namespace tps
