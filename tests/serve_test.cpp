// The server's pieces without a network: tools rendered as harmony's
// functions namespace, requests read and refused by name, and responses
// built from generated tokens (channels, tool calls, stop strings, raw
// output, log-probabilities).
#include <gtest/gtest.h>

#include <chrono>

#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "serve/api/tool_schema.h"
#include "serve/chat/chat_request.h"
#include "serve/chat/chat_response.h"
#include "serve/chat/chat_text.h"
#include "serve/http/api_error.h"
#include "serve/metrics.h"
#include "serve/responses/conversation_ids.h"
#include "serve/responses/response_store.h"
#include "serve/responses/responses_output.h"
#include "serve/responses/responses_request.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using json = nlohmann::ordered_json;
using testing::test_tokenizer;

const ApiLimits kLimits{"gpt-oss-test", 256};

// openai/harmony's test_render_functions_with_parameters tools, as an
// OpenAI request carries them, and what harmony renders.
TEST(ToolSchema, RendersAsTheHarmonyLibraryDoes) {
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_location", "description": "Gets the location of the user."}},
    {"type": "function", "function": {"name": "get_current_weather",
      "description": "Gets the current weather in the provided location.",
      "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_multiple_weathers",
      "description": "Gets the current weather in the provided list of locations.",
      "parameters": {"type": "object", "properties": {
        "locations": {"type": "array", "items": {"type": "string"},
                      "description": "List of city and state, e.g. [\"San Francisco, CA\", \"New York, NY\"]"},
        "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["locations"]}}}])");
  EXPECT_EQ(render_functions(tools, 1 << 20),
            "// Gets the location of the user.\ntype get_location = () => any;\n\n"
            "// Gets the current weather in the provided location.\ntype get_current_weather = (_: {\n"
            "// The city and state, e.g. San Francisco, CA\nlocation: string,\n"
            "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n"
            "// Gets the current weather in the provided list of locations.\ntype get_multiple_weathers = (_: {\n"
            "// List of city and state, e.g. [\"San Francisco, CA\", \"New York, NY\"]\nlocations: string[],\n"
            "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n");
  EXPECT_THROW(render_functions(json::parse(R"([{"type": "function", "function": {}}])"), 1 << 20), ApiError);
  EXPECT_THROW(render_functions(json::parse(R"({"a": 1})"), 1 << 20), ApiError);
}

// A required list was scanned once per property, each name copied to compare
// it: 1,000 properties and 261,000 names took 3.2 s (256 properties, the most a
// request's object may have, 1.5 s).
TEST(ToolSchema, TimeIsLinearInTheSchema) {
  json properties = json::object(), required = json::array();
  for (int i = 0; i < 1000; ++i) properties[cat("p", i)] = {{"type", "string"}};
  for (int i = 0; i < 261000; ++i) required.push_back(cat("p", i));
  const json tools = json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", properties}, {"required", required}}}}}}});
  const auto t0 = std::chrono::steady_clock::now();
  const std::string text = render_functions(tools, 1 << 20);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(text.find("\np999: string,\n"), std::string::npos);
  EXPECT_EQ(text.find("?:"), std::string::npos);  // every one required
  EXPECT_LT(seconds, 2.0) << "scanned per property: 3.2 s here; looked up: 0.2 s (0.4 s under ASan)";
}

// Text longer than the context holds (its tokens at most longest_token
// bytes) is refused as it is written, before it is tokenized.
TEST(ToolSchema, ARenderingPastWhatTheContextHoldsIsRefused) {
  const json tools =
      json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"description", std::string(5000, 'x')}}}}});
  EXPECT_EQ(render_functions(tools, 6000), "// " + std::string(5000, 'x') + "\ntype f = () => any;\n\n");
  try {
    render_functions(tools, 4000);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "tools");
    EXPECT_NE(std::string(e.what()).find("more than 4000 bytes"), std::string::npos) << e.what();
  }
}

void expect_body_refused(const std::string& text, const std::string& fragment) {
  try {
    parse_request_body(text);
    ADD_FAILURE() << "accepted: " << text.substr(0, 100);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// A few hundred KB of nesting killed the server: what parsing builds, every
// later step (rendering the tools, dumping arguments) recurses over. The
// depth is refused while parsing, before anything that deep exists.
TEST(RequestBody, NestingPastTheBoundIsRefusedWhileParsing) {
  expect_body_refused(std::string(200000, '[') + std::string(200000, ']'), "deeper than 64 levels");
  std::string schema;
  for (int i = 0; i < 20000; ++i) schema += R"({"type": "array", "items": )";
  schema += R"({"type": "string"})" + std::string(20000, '}');
  expect_body_refused(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function",
      "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": )" +
                          schema + "}}}}]}",
                      "deeper than 64 levels");
  EXPECT_NO_THROW(parse_request_body(std::string(64, '[') + "1" + std::string(64, ']')));
}

TEST(RequestBody, MoreValuesThanTheBoundAreRefused) {
  std::string many = "[0";
  for (size_t i = 2; i < kMaxBodyValues; ++i) many += ",0";
  EXPECT_NO_THROW(parse_request_body(many + "]"));  // the array and its numbers: the bound
  expect_body_refused(many + ",0]", "more than 262144 JSON values");
}

// An ordered_json object finds each key by scanning its members: an object
// of 40,000 members (a tool's properties) took 5 s to parse.
TEST(RequestBody, AnObjectOfMoreMembersThanTheBoundIsRefused) {
  std::string object = "{";
  for (size_t i = 0; i < 40000; ++i) object += cat(i ? "," : "", "\"p", i, "\": 0");
  expect_body_refused(object + "}", "more than 256 members");
  std::string bound = "{";
  for (size_t i = 0; i < kMaxObjectMembers; ++i) bound += cat(i ? "," : "", "\"p", i, "\": 0");
  EXPECT_EQ(parse_request_body(bound + "}").size(), kMaxObjectMembers);
}

// A number past a double's range was an out_of_range exception, not a
// parse error: a 500.
TEST(RequestBody, ANumberPastADoubleIsA400) {
  expect_body_refused(R"({"prompt": "hi", "temperature": 1e999})", "number overflow");
  expect_body_refused(R"({"prompt": "hi", "temperature": -1e400})", "number overflow");
  expect_body_refused("{not json", "not valid JSON");
}

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
  expect_refused(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 100000})", 400, "max_tokens",
                 "more than the context of 256");
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

// A label taken from the path a client sent forged a line of the exposition
// (a quote and a newline) and added a series per path, forever.
TEST(Metrics, EndpointLabelsComeFromAFixedSet) {
  Metrics m;
  m.request("/v1/x\",status=\"200\"} 1\ntps_forged_total 9\n#", 401);
  for (int i = 0; i < 1000; ++i) m.request(cat("/v1/path", i), 401);
  m.request("/v1/chat/completions", 200);
  const std::string text = m.prometheus();
  EXPECT_EQ(text.find("tps_forged_total"), std::string::npos) << text;
  EXPECT_NE(text.find("tps_requests_total{endpoint=\"other\",status=\"401\"} 1001\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tps_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1\n"), std::string::npos);
  size_t series = 0;
  for (size_t at = text.find("\ntps_requests_total{"); at != std::string::npos;
       at = text.find("\ntps_requests_total{", at + 1))
    ++series;
  EXPECT_EQ(series, 2u);
}

// What a request asks of its output becomes the engine's constraint spec:
// the whole harmony turn for a chat, the raw JSON for a completion; a chat
// that asks nothing stays free.
TEST(OutputConstraint, ChatRequestsBecomeHarmonyTurns) {
  const std::string base = R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 100, "tools": [
      {"type": "function", "function": {"name": "add", "strict": true, "parameters": {"type": "object",
        "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "free"}}], )";
  auto spec = [&](const std::string& rest) {
    const std::string s = parse_chat_request(json::parse(base + rest + "}"), kLimits).output.spec;
    return s.empty() ? json() : json::parse(s);
  };
  // Strict tools hold their calls' arguments; the others take any object.
  const json automatic = spec(R"("reasoning_effort": "low")");
  EXPECT_EQ(automatic["format"], "harmony");
  EXPECT_EQ(automatic["final"], "text");
  EXPECT_EQ(automatic["reasoning_budget"], 50);  // half of max_tokens, under low's 512
  ASSERT_EQ(automatic["tools"].size(), 2u);
  EXPECT_EQ(automatic["tools"][0]["schema"]["required"], json::array({"a"}));
  EXPECT_TRUE(automatic["tools"][1]["schema"].is_null());
  // A call is forced: no final answer; named: only that function.
  EXPECT_EQ(spec(R"("tool_choice": "required")")["final"], "none");
  const json named = spec(R"("tool_choice": {"type": "function", "function": {"name": "free"}})");
  EXPECT_EQ(named["final"], "none");
  ASSERT_EQ(named["tools"].size(), 1u);
  EXPECT_EQ(named["tools"][0]["name"], "free");
  // The answer's JSON; with tool_choice none, no function may be called.
  const json schema = spec(R"("tool_choice": "none", "response_format": {"type": "json_schema", "json_schema":
      {"name": "n", "strict": true, "schema": {"type": "boolean"}}})");
  EXPECT_EQ(schema["final"]["schema"], json({{"type", "boolean"}}));
  EXPECT_TRUE(schema["tools"].empty());
  EXPECT_EQ(spec(R"("tool_choice": "none", "response_format": {"type": "json_object"})")["final"],
            json({{"json_object", true}}));
  // Nothing asked: free, as before.
  const json free_chat = json::parse(R"({"messages": [{"role": "user", "content": "x"}], "tools": [
      {"type": "function", "function": {"name": "free"}}], "response_format": {"type": "text"}})");
  EXPECT_EQ(parse_chat_request(free_chat, kLimits).output.spec, "");
}

TEST(OutputConstraint, CompletionsHoldTheRawText) {
  const json body = json::parse(R"({"prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"name": "n", "schema": {"enum": [1, 2]}}}})");
  EXPECT_EQ(json::parse(parse_completion_request(body, kLimits).output.spec),
            json::parse(R"({"format": "json_schema", "schema": {"enum": [1, 2]}})"));
  EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt": "x"})"), kLimits).output.spec, "");
}

// A schema keyword the grammar engine cannot honour is a 400 naming the
// request's parameter, the keyword and its path -- never ignored.
TEST(OutputConstraint, WhatCannotBeHonouredIsRefusedByParameterAndKeyword) {
  ConstraintCache cache(test_tokenizer());
  auto refused = [&](const std::string& body, const std::string& param, const std::string& words) {
    const ChatRequest r = parse_chat_request(json::parse(body), kLimits);
    try {
      check_output_constraint(r.output, cache);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, param);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
      "json_schema": {"name": "n", "schema": {"type": "object", "properties": {"n": {"type": "number",
      "multipleOf": 3}}}}}})",
          "response_format.json_schema.schema", "multipleOf");
  refused(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function":
      {"name": "f", "strict": true, "parameters": {"type": "object", "not": {"required": ["a"]}}}}]})",
          "tools[0].function.parameters", "not");
  // What it can: compiled, and then the generation loop finds it cached.
  const ChatRequest ok = parse_chat_request(
      json::parse(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})"),
      kLimits);
  EXPECT_NO_THROW(check_output_constraint(ok.output, cache));
}

// The Responses API's input items become harmony messages; system and
// developer items become instructions; each item is listed with an id.
TEST(ResponsesRequest, InputItemsBecomeHarmonyMessages) {
  ResponsesRequest r = parse_responses_request(json::parse(R"({
    "model": "gpt-oss-test", "instructions": "Be brief.", "reasoning": {"effort": "high"},
    "max_output_tokens": 10, "store": false, "previous_response_id": "resp_1",
    "tools": [{"type": "function", "name": "add", "strict": true, "parameters": {"type": "object",
               "properties": {"a": {"type": "number"}}, "required": ["a"], "additionalProperties": false}}],
    "input": [
      {"role": "developer", "content": "Use tools."},
      {"role": "user", "content": [{"type": "input_text", "text": "add 1"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "need add"}]},
      {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{\"a\":1}"},
      {"type": "function_call_output", "call_id": "c1", "output": "1"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 1."}]},
      {"type": "function_call_output", "call_id": "c0", "output": "earlier"}]})"),
                                               kLimits, "x");
  EXPECT_EQ(r.max_new_tokens, 10);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_EQ(r.conversation.reasoning, "high");
  EXPECT_EQ(r.conversation.instructions, "Be brief.");
  EXPECT_EQ(r.item_instructions, "Use tools.");
  EXPECT_EQ(r.conversation.functions, "type add = (_: {\na: number,\n}) => any;\n\n");
  EXPECT_NE(r.output.spec.find("\"add\""), std::string::npos);  // strict: its arguments held to its schema
  name_function_outputs(r, {{"c0", "lookup"}});                 // c0: a call of the conversation before
  const std::vector<HarmonyMessage>& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[1].channel, "analysis");
  EXPECT_EQ(m[1].content, "need add");
  EXPECT_EQ(m[2].recipient, "functions.add");
  EXPECT_EQ(m[2].content, "{\"a\":1}");
  EXPECT_EQ(m[3].role, "functions.add");
  EXPECT_EQ(m[3].recipient, "assistant");
  EXPECT_EQ(m[4].channel, "final");
  EXPECT_EQ(m[5].role, "functions.lookup");
  ASSERT_EQ(r.input_items.size(), 7u);
  EXPECT_EQ(r.input_items[2]["id"], "rs_1");
  EXPECT_EQ(r.input_items[1]["id"], "item_x_in1");
  // A string is one user message.
  const ResponsesRequest s =
      parse_responses_request(json::parse(R"({"input": "hi", "reasoning": {"summary": "auto"}})"), kLimits, "y");
  EXPECT_EQ(s.echo["reasoning"]["summary"], "auto");  // gpt-oss writes none: "auto" gives none
  ASSERT_EQ(s.conversation.messages.size(), 1u);
  EXPECT_EQ(s.conversation.messages[0].content, "hi");
  EXPECT_EQ(s.input_items[0]["content"][0]["text"], "hi");
  // An output answering a call no one made.
  ResponsesRequest lost = parse_responses_request(
      json::parse(R"({"input": [{"type": "function_call_output", "call_id": "zz", "output": "1"}]})"), kLimits, "z");
  EXPECT_THROW(name_function_outputs(lost, {}), ApiError);
}

TEST(ResponsesRequest, WhatIsNotDoneIsRefusedByName) {
  auto refused = [](const std::string& body, const std::string& param) {
    try {
      parse_responses_request(json::parse(body), kLimits, "x");
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << body;
      EXPECT_EQ(e.param, param) << body << ": " << e.what();
    }
  };
  refused(R"({})", "input");
  refused(R"({"input": []})", "input");
  refused(R"({"input": "x", "background": true})", "background");
  refused(R"({"input": "x", "include": ["message.output_text.logprobs"]})", "include[0]");
  refused(R"({"input": "x", "include": "reasoning.encrypted_content"})", "include");
  refused(R"({"input": "x", "truncation": "auto"})", "truncation");
  refused(R"({"input": "x", "top_logprobs": 3})", "top_logprobs");
  refused(R"({"input": "x", "reasoning": {"effort": "max"}})", "reasoning.effort");
  refused(R"({"input": "x", "reasoning": {"summary": "detailed"}})", "reasoning.summary");
  refused(R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type");
  refused(R"({"input": "x", "tools": [{"type": "function"}]})", "tools[0].name");
  refused(R"({"input": "x", "tool_choice": "required"})", "tool_choice");
  refused(R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", "text.format.schema");
  refused(R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format.type");
  refused(R"({"input": "x", "max_output_tokens": 100000})", "max_output_tokens");
  refused(R"({"input": "x", "messages": []})", "messages");
  refused(R"({"input": [{"type": "web_search_call"}]})", "input[0].type");
  refused(R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role");
  refused(R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})", "input[0].content[0].type");
  refused(R"({"input": [{"type": "function_call", "name": "f"}]})", "input[0].call_id");
  refused(R"({"input": [{"type": "reasoning", "encrypted_content": "xx"}]})", "input[0].encrypted_content");
  refused(R"({"input": [{"type": "reasoning", "encrypted_content": "tps-reasoning-1:Zm9v!"}]})",
          "input[0].encrypted_content");
  try {
    parse_responses_request(json{{"input", "x"}, {"model", "gpt-4o"}}, kLimits, "x");
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
  }
}

// Tokens of a text, special tokens parsed.
std::vector<int32_t> ids_of(const std::string& text) { return test_tokenizer().encode(text, true); }

// Generated tokens through ResponseOutput: the stream's event types, in
// order (a run of deltas once).
std::vector<std::string> generate(ResponseOutput& out, const std::vector<int32_t>& ids, bool incomplete = false) {
  std::vector<std::string> types;
  auto add = [&](const std::vector<nlohmann::ordered_json>& events) {
    for (const auto& e : events)
      if (types.empty() || types.back() != e["type"] || !types.back().ends_with(".delta")) types.push_back(e["type"]);
  };
  for (int32_t id : ids) add(out.push(id));
  add(out.finish(incomplete));
  return types;
}

// A turn's follow-up begins with exactly the ids the model saw and
// generated (never its text encoded again), with harmony's rule: a turn that
// ended in a call keeps its reasoning, one that ended in a final message
// loses the analysis before it; a trailing <|return|> is stored as <|end|>.
TEST(ConversationIds, AFollowUpBeginsWithThePreviousTurnsIds) {
  const EncodeText encode = [](const std::string& s) { return test_tokenizer().encode(s); };
  Conversation c;
  c.instructions = "Be brief.";
  c.messages.push_back({"user", "", "", "", "Weather in Paris?"});
  const RenderedConversation one = render_parts(c, encode);
  EXPECT_EQ(join_prompt(one.header, one.messages, one.tail), render_conversation(c, encode));
  // The model's call, tokenized as no encoder would ("Par" "is" as two pieces).
  std::vector<int32_t> call = ids_of(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"");
  for (const char* piece : {"Par", "is", "\"}"}) call.push_back(test_tokenizer().encode(piece).at(0));
  call.push_back(harmony::kCall);
  ResponseOutput out(test_tokenizer(), "t", one.tail, ReasoningItems::text);
  generate(out, call);
  std::vector<MessageIds> history = one.messages;
  history.insert(history.end(), out.messages().begin(), out.messages().end());
  drop_earlier_reasoning(history);
  ASSERT_EQ(out.items().size(), 2u);
  EXPECT_EQ(out.items()[1]["arguments"], "{\"city\": \"Paris\"}");
  // Turn 2: the call's result.
  Conversation c2 = c;
  c2.messages = {{"functions.get_weather", "commentary", "assistant", "", "sunny"}};
  const RenderedConversation two = render_parts(c2, encode);
  history.insert(history.end(), two.messages.begin(), two.messages.end());
  drop_earlier_reasoning(history);
  const std::vector<int32_t> prompt2 = join_prompt(two.header, history, two.tail);
  std::vector<int32_t> before = render_conversation(c, encode);
  before.insert(before.end(), call.begin(), call.end());
  ASSERT_GE(prompt2.size(), before.size());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), prompt2.begin())) << "turn 1's prompt and output, as they were";
  // Turn 2's answer: reasoning, then a final message.
  const std::vector<int32_t> answer = ids_of(
      "<|channel|>analysis<|message|>It is sunny.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>");
  ResponseOutput out2(test_tokenizer(), "u", two.tail, ReasoningItems::text);
  EXPECT_EQ(generate(out2, answer),
            (std::vector<std::string>{
                "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
                "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                "response.output_text.done", "response.content_part.done", "response.output_item.done"}));
  EXPECT_EQ(out2.output_text(), "Sunny.");
  EXPECT_GT(out2.reasoning_tokens(), 0);
  history.insert(history.end(), out2.messages().begin(), out2.messages().end());
  drop_earlier_reasoning(history);
  // Kept: the user, the call, its result, the final answer (both analyses gone).
  ASSERT_EQ(history.size(), 4u);
  EXPECT_EQ(history[3].kind, MessageKind::final);
  EXPECT_EQ(history[3].ids.back(), harmony::kEnd);
  const std::vector<int32_t> final_ids = ids_of("<|start|>assistant<|channel|>final<|message|>Sunny.<|end|>");
  EXPECT_EQ(history[3].ids, final_ids);
  EXPECT_EQ(history[1].ids.back(), harmony::kCall);
  // Turn 3 begins with all of turn 2's stored ids.
  const std::vector<int32_t> stored = join_prompt(two.header, history, {});
  Conversation c3 = c;
  c3.messages = {{"user", "", "", "", "Thanks"}};
  const RenderedConversation three = render_parts(c3, encode);
  std::vector<MessageIds> h3 = history;
  h3.insert(h3.end(), three.messages.begin(), three.messages.end());
  drop_earlier_reasoning(h3);
  const std::vector<int32_t> prompt3 = join_prompt(three.header, h3, three.tail);
  EXPECT_TRUE(std::equal(stored.begin(), stored.end(), prompt3.begin()));
}

// include: ["reasoning.encrypted_content"] (a client that stores nothing on
// the server, as Codex): a reasoning item carries its text opaquely, and
// sent back with nothing else it is the analysis message it was.
TEST(ResponseOutput, ReasoningComesBackThroughEncryptedContent) {
  const std::vector<int32_t> call = ids_of(
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>");
  ResponseOutput sealed(test_tokenizer(), "s", {harmony::kStart}, ReasoningItems::text_and_blob),
      plain(test_tokenizer(), "p", {harmony::kStart}, ReasoningItems::text);
  generate(sealed, call), generate(plain, call);
  ASSERT_EQ(sealed.items().size(), 2u);
  EXPECT_FALSE(plain.items()[0].contains("encrypted_content"));
  const std::string blob = sealed.items()[0].value("encrypted_content", "");
  EXPECT_EQ(blob.find("Need the weather"), std::string::npos) << blob;
  json reasoning = sealed.items()[0];
  reasoning.erase("content");  // what a client keeping only the blob sends
  json body = {{"include", {"reasoning.encrypted_content"}},
               {"store", false},
               {"input", {{{"role", "user"}, {"content", "Weather in Paris?"}}, reasoning, sealed.items()[1]}}};
  const ResponsesRequest r = parse_responses_request(body, kLimits, "x");
  EXPECT_TRUE(r.encrypted_reasoning);
  EXPECT_FALSE(r.store);
  ASSERT_EQ(r.conversation.messages.size(), 3u);
  EXPECT_EQ(r.conversation.messages[1].channel, "analysis");
  EXPECT_EQ(r.conversation.messages[1].content, "Need the weather.");
  // The item's own text, when sent, is what counts.
  body["input"][1]["content"] = {{{"type", "reasoning_text"}, {"text", "Other."}}};
  EXPECT_EQ(parse_responses_request(body, kLimits, "x").conversation.messages[1].content, "Other.");
}

// An answer cut short: its open item ends incomplete, and its message is
// closed with <|end|> for the next turn.
TEST(ResponseOutput, AnAnswerCutShortIsClosed) {
  ResponseOutput out(test_tokenizer(), "v", {harmony::kStart}, ReasoningItems::text);
  generate(out, ids_of("<|channel|>final<|message|>Hello wor"), true);
  ASSERT_EQ(out.items().size(), 1u);
  EXPECT_EQ(out.items()[0]["status"], "incomplete");
  EXPECT_EQ(out.items()[0]["content"][0]["text"], "Hello wor");
  ASSERT_EQ(out.messages().size(), 1u);
  EXPECT_EQ(out.messages()[0].ids.back(), harmony::kEnd);
  EXPECT_EQ(out.messages()[0].ids.front(), harmony::kStart);
}

std::shared_ptr<StoredResponse> stored(size_t ids) {
  auto r = std::make_shared<StoredResponse>();
  r->messages.push_back({std::vector<int32_t>(ids, 7), MessageKind::final});
  return r;
}

// Past its count or its bytes the store lets the least recently used go;
// a lookup makes a response recently used; one past the byte budget alone
// is not stored.
TEST(ResponseStore, LetsTheLeastRecentlyUsedGo) {
  ResponseStore count(2, 1 << 20);
  count.put("a", stored(10)), count.put("b", stored(10));
  EXPECT_NE(count.get("a", true), nullptr);  // a is now the more recent
  count.put("c", stored(10));
  EXPECT_EQ(count.get("b", true), nullptr);
  EXPECT_NE(count.get("a", false), nullptr);
  EXPECT_NE(count.get("c", false), nullptr);
  ResponseStoreStats s = count.stats();
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_TRUE(count.erase("a"));
  EXPECT_FALSE(count.erase("a"));
  EXPECT_EQ(count.stats().count, 1u);

  const size_t one = stored(1000)->bytes() + 1;
  ResponseStore bytes(100, 2 * one + one / 2);
  bytes.put("x", stored(1000)), bytes.put("y", stored(1000)), bytes.put("z", stored(1000));
  EXPECT_EQ(bytes.get("x", false), nullptr);
  EXPECT_NE(bytes.get("z", false), nullptr);
  EXPECT_LE(bytes.stats().bytes, 2 * one + one / 2);
  EXPECT_FALSE(bytes.put("huge", stored(100000)));
  EXPECT_NE(bytes.get("y", false), nullptr);  // nothing let go for it
}

}  // namespace
}  // namespace tps
