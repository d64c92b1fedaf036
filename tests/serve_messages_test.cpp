// Anthropic's Messages API without a network: a request's fields read and
// refused by name, content blocks from generated tokens (and the stream's
// events in order), and a follow-up that sends the conversation back
// rendered from the exact ids of the turn before.
#include <gtest/gtest.h>

#include "engine/sched/constraint.h"
#include "engine/text/conversation_ids.h"
#include "serve/api/reasoning_blob.h"
#include "serve/http/api_error.h"
#include "serve/messages/generated_turns.h"
#include "serve/messages/messages_output.h"
#include "serve/messages/messages_request.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using json = nlohmann::ordered_json;
using testing::test_tokenizer;

const ApiLimits kLimits{"gpt-oss-test", 256};

const char* const kWeatherTool = R"({"name": "get_weather", "description": "Weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})";

TEST(MessagesRequest, BlocksBecomeHarmonyMessages) {
  const std::string signature = reasoning_blob("Need weather.");
  MessagesRequest r = parse_messages_request(json::parse(std::string(R"({
    "model": "gpt-oss-test", "max_tokens": 20, "system": [{"type": "text", "text": "Be brief."}],
    "temperature": 0.5, "top_k": 40, "stop_sequences": ["END"], "metadata": {"user_id": "u"},
    "thinking": {"type": "enabled", "budget_tokens": 10}, "tool_choice": {"type": "any"},
    "tools": [)") + kWeatherTool + R"(],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Need weather.", "signature": ")" +
                                                         signature + R"("},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                                   {"type": "text", "text": "And?"}]}]})"),
                                             kLimits);
  EXPECT_EQ(r.max_new_tokens, 20);
  EXPECT_EQ(parse_messages_request(
                json::parse(R"({"max_tokens": 32000, "messages": [{"role": "user", "content": "x"}]})"), kLimits)
                .max_new_tokens,
            256);  // the context's, then the room's (Server::submit)
  EXPECT_FLOAT_EQ(r.sampler.temperature, 0.5f);
  EXPECT_EQ(r.sampler.top_k, 40);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.conversation.instructions, "Be brief.");
  EXPECT_EQ(r.conversation.reasoning, "low");  // budget_tokens under 2,048
  EXPECT_TRUE(r.show_thinking);
  EXPECT_EQ(r.reasoning_budget, 10);
  EXPECT_NE(r.conversation.functions.find("get_weather"), std::string::npos);
  ASSERT_TRUE(r.output);
  EXPECT_EQ(r.output->content.kind, ContentSpec::Kind::none);  // any: a call, held to its schema
  ASSERT_EQ(r.output->tools.size(), 1u);
  EXPECT_EQ(r.output->tools[0].name, "get_weather");
  EXPECT_EQ(r.output->tools[0].arguments.kind, ContentSpec::Kind::json_schema);
  const std::vector<HarmonyMessage>& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[1].channel, "analysis");
  EXPECT_EQ(m[2].channel, "commentary");  // text before a call: a preamble
  EXPECT_EQ(m[3].recipient, "functions.get_weather");
  EXPECT_EQ(m[3].content, R"({"city":"Paris"})");
  EXPECT_EQ(m[4].role, "functions.get_weather");
  EXPECT_EQ(m[4].content, "sunny");
  EXPECT_EQ(m[5].content, "And?");
  ASSERT_EQ(r.assistant_turns.size(), 1u);
  EXPECT_EQ(r.assistant_turns[0].first, 1u);
  EXPECT_EQ(r.assistant_turns[0].end, 4u);
}

TEST(MessagesRequest, ThinkingDisabledIsLowAndHidden) {
  const MessagesRequest r = parse_messages_request(
      json::parse(
          R"({"max_tokens": 5, "thinking": {"type": "disabled"}, "messages": [{"role": "user", "content": "x"}]})"),
      kLimits);
  EXPECT_EQ(r.conversation.reasoning, "low");
  EXPECT_FALSE(r.show_thinking);
  EXPECT_FALSE(r.output);  // nothing asked of the output
  // count_tokens takes the body without max_tokens.
  EXPECT_NO_THROW(
      parse_messages_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), kLimits, true));
}

TEST(MessagesRequest, WhatIsNotDoneIsRefusedByName) {
  auto refused = [](const std::string& fields, const std::string& param) {
    const std::string body = "{" + fields + "}";
    try {
      parse_messages_request(json::parse(body), kLimits);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << body;
      EXPECT_EQ(e.param, param) << body << ": " << e.what();
      EXPECT_EQ(e.anthropic_body()["error"]["type"], "invalid_request_error");
    }
  };
  const std::string ok = R"("messages": [{"role": "user", "content": "x"}])";
  const std::string max = R"("max_tokens": 5, )";
  refused(ok, "max_tokens");
  refused(R"("max_tokens": 0, )" + ok, "max_tokens");
  refused(R"("max_tokens": "many", )" + ok, "max_tokens");
  refused(max + R"("messages": [])", "messages");
  refused(max + R"("temperature": 1.5, )" + ok, "temperature");
  refused(max + R"("top_p": 0, )" + ok, "top_p");
  refused(max + R"("top_k": -1, )" + ok, "top_k");
  refused(max + R"("stop_sequences": "END", )" + ok, "stop_sequences");
  refused(max + R"("stop_sequences": [""], )" + ok, "stop_sequences[0]");
  refused(max + R"("system": [{"type": "image"}], )" + ok, "system[0].type");
  refused(max + R"("metadata": "u", )" + ok, "metadata");
  refused(max + R"("stream": "yes", )" + ok, "stream");
  refused(max + R"("container": "c", )" + ok, "container");
  refused(max + R"("mcp_servers": [], )" + ok, "mcp_servers");
  refused(max + R"("service_tier": "priority", )" + ok, "service_tier");
  refused(max + R"("thinking": {"type": "enabled"}, )" + ok, "thinking.budget_tokens");
  refused(max + R"("thinking": {"type": "enabled", "budget_tokens": 9}, )" + ok, "thinking.budget_tokens");
  refused(max + R"("thinking": {"type": "adaptive"}, )" + ok, "thinking.type");
  refused(max + R"("tools": {}, )" + ok, "tools");
  refused(max + R"("tools": [{"type": "web_search_20250305", "name": "web_search"}], )" + ok, "tools[0].type");
  refused(max + R"("tools": [{"type": 5, "name": "f", "input_schema": {}}], )" + ok, "tools[0].type");
  refused(max + R"("tools": [{"input_schema": {}}], )" + ok, "tools[0].name");
  refused(max + R"("messages": [{"role": "user", "content": null}])", "messages[0].content");
  refused(max + R"("messages": [{"role": "user", "content": [5]}])", "messages[0].content[0]");
  refused(max + R"("messages": [{"role": "user", "content": "x"}, {"role": "assistant"}, )"
                R"({"role": "user", "content": "y"}])",
          "messages[1].content");
  refused(max + R"("tools": [{"name": "f"}], )" + ok, "tools[0].input_schema");
  refused(max + R"("tools": [{"name": "f", "input_schema": {}, "strict": 1}], )" + ok, "tools[0].strict");
  refused(max + R"("tool_choice": "auto", )" + ok, "tool_choice");
  refused(max + R"("tool_choice": {"type": "required"}, )" + ok, "tool_choice.type");
  refused(max + R"("tool_choice": {"type": "tool"}, )" + ok, "tool_choice.name");
  refused(max + R"("tool_choice": {"type": "any"}, )" + ok, "tool_choice");  // no tools to call
  refused(max + R"("tool_choice": {"type": "tool", "name": "g"}, "tools": [)" + std::string(kWeatherTool) + "], " + ok,
          "tool_choice");
  refused(max + R"("messages": [{"role": "system", "content": "x"}])", "messages[0].role");
  refused(max + R"("messages": [{"role": "user", "content": [{"type": "image"}]}])", "messages[0].content[0].type");
  refused(max + R"("messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}])",
          "messages[0].content[0].tool_use_id");
  refused(max + R"("messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "prefill"}])",
          "messages[1]");
  const std::string turn = R"({"role": "user", "content": "x"}, {"role": "assistant", "content": [)";
  const std::string then = R"(]}, {"role": "user", "content": "y"}])";
  refused(max + R"("messages": [)" + turn + R"({"type": "redacted_thinking", "data": "x"})" + then,
          "messages[1].content[0].type");
  refused(max + R"("messages": [)" + turn + R"({"type": "thinking", "thinking": "a", "signature": "b"})" + then,
          "messages[1].content[0].signature");
  refused(max + R"("messages": [)" + turn + R"({"type": "tool_use", "id": "t", "name": "f", "input": "x"})" + then,
          "messages[1].content[0].input");
  try {
    parse_messages_request(json::parse(R"({"model": "claude-x", "max_tokens": 5, )" + ok + "}"), kLimits);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.anthropic_body()["error"]["type"], "not_found_error");
  }
}

// A schema the grammar engine cannot hold: a tool that did not ask for
// strict gets any JSON object (best effort, as Anthropic's), one that asked
// is refused by the name of its input_schema.
TEST(MessagesRequest, AToolTheEngineCannotHoldIsHeldAsAnObjectUnlessStrict) {
  ConstraintCache cache(test_tokenizer());
  auto body = [](const char* strict) {
    return json::parse(std::string(R"({"max_tokens": 50, "tool_choice": {"type": "any"}, "tools": [)") + kWeatherTool +
                       R"(, {"name": "code", )" + strict +
                       R"("input_schema": {"type": "object", "properties": {"c": {"type": "string",
                          "not": {"const": "x"}}}}}],
                        "messages": [{"role": "user", "content": "x"}]})");
  };
  MessagesRequest best = parse_messages_request(body(""), kLimits);
  check_output_constraint(best.output, cache);
  ASSERT_TRUE(best.output);
  // get_weather's is held, code's arguments are any object.
  EXPECT_EQ(cache.get(*best.output)->unheld_tools, std::vector<std::string>{"code"});
  MessagesRequest strict = parse_messages_request(body(R"("strict": true, )"), kLimits);
  try {
    check_output_constraint(strict.output, cache);
    ADD_FAILURE() << "a strict tool the engine cannot hold was taken";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tools[1].input_schema") << e.what();
  }
}

TEST(ApiError, AnthropicShapeByStatus) {
  EXPECT_EQ(ApiError(401, "no").anthropic_body(),
            (nlohmann::json{{"type", "error"}, {"error", {{"type", "authentication_error"}, {"message", "no"}}}}));
  EXPECT_EQ(ApiError(503, "busy").anthropic_body()["error"]["type"], "overloaded_error");
  EXPECT_EQ(ApiError(500, "bug").anthropic_body()["error"]["type"], "api_error");
}

std::vector<int32_t> ids_of(const std::string& text) { return test_tokenizer().encode(text, true); }

// The events of generated tokens, in order (a run of deltas of one kind once).
std::vector<std::string> generate(MessagesOutput& out, const std::vector<int32_t>& ids) {
  std::vector<std::string> types;
  auto add = [&](const std::vector<json>& events) {
    for (const json& e : events) {
      std::string t = e["type"];
      if (t == "content_block_delta") t.append(":").append(e["delta"]["type"].get<std::string>());
      if (types.empty() || types.back() != t || !t.starts_with("content_block_delta")) types.push_back(t);
    }
  };
  for (int32_t id : ids) add(out.push(id));
  add(out.finish());
  return types;
}

const char* const kCallTurn =
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
    "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";

TEST(MessagesOutput, ThinkingThenToolUse) {
  MessagesOutput out(test_tokenizer(), "t", {}, true, {});
  EXPECT_EQ(
      generate(out, ids_of(kCallTurn)),
      (std::vector<std::string>{"content_block_start", "content_block_delta:thinking_delta",
                                "content_block_delta:signature_delta", "content_block_stop", "content_block_start",
                                "content_block_delta:input_json_delta", "content_block_stop"}));
  ASSERT_EQ(out.content().size(), 2u);
  EXPECT_EQ(out.content()[0]["thinking"], "Need weather.");
  EXPECT_EQ(reasoning_of_blob(out.content()[0]["signature"].get<std::string>()), "Need weather.");
  EXPECT_EQ(out.content()[1]["type"], "tool_use");
  EXPECT_EQ(out.content()[1]["name"], "get_weather");
  EXPECT_EQ(out.content()[1]["input"], (json{{"city", "Paris"}}));
  EXPECT_TRUE(out.content()[1]["id"].get<std::string>().starts_with("toolu_"));
  EXPECT_STREQ(out.stop_reason(false), "tool_use");
}

TEST(MessagesOutput, HiddenThinkingStopSequencesAndLength) {
  MessagesOutput hidden(test_tokenizer(), "t", {}, false, {"STOP"});
  generate(hidden, ids_of("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>"
                          "Hello STOP there<|return|>"));
  ASSERT_EQ(hidden.content().size(), 1u);
  EXPECT_EQ(hidden.content()[0], (json{{"type", "text"}, {"text", "Hello "}}));
  EXPECT_STREQ(hidden.stop_reason(false), "stop_sequence");
  EXPECT_EQ(hidden.stop_sequence(), "STOP");
  MessagesOutput cut(test_tokenizer(), "t", {}, true, {});
  generate(cut, ids_of("<|channel|>final<|message|>Hel"));
  EXPECT_STREQ(cut.stop_reason(true), "max_tokens");
  EXPECT_EQ(cut.content()[0]["text"], "Hel");
  MessagesOutput done(test_tokenizer(), "t", {}, true, {});
  generate(done, ids_of("<|channel|>final<|message|>Hi.<|return|>"));
  EXPECT_STREQ(done.stop_reason(false), "end_turn");
  EXPECT_TRUE(done.stop_sequence().is_null());
}

// A tool loop sent back whole: the follow-up's prompt begins with the first
// turn's prompt and the ids the model generated (tokenized as no encoder
// would), found by the content the response showed.
TEST(GeneratedTurns, AFollowUpBeginsWithTheGeneratedIds) {
  const EncodeText encode = [](const std::string& s) { return test_tokenizer().encode(s); };
  const GeneratedTurns none;
  GeneratedTurns turns;
  const std::string tools = std::string(R"("tools": [)") + kWeatherTool + "], ";
  const json first_body = json::parse(R"({"max_tokens": 50, )" + tools +
                                      R"("messages": [{"role": "user", "content": "Weather in Paris?"}]})");
  std::vector<int32_t> tail;
  const std::vector<int32_t> first = render_prompt(parse_messages_request(first_body, kLimits), encode, turns, tail);
  std::vector<int32_t> call = ids_of(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"");
  for (const char* piece : {"Par", "is", "\"}"}) call.push_back(test_tokenizer().encode(piece).at(0));
  call.push_back(harmony::kCall);
  MessagesOutput out(test_tokenizer(), "t", tail, true, {});
  generate(out, call);
  turns.put(assistant_turn_key(assistant_messages(out.content(), "content")), out.messages());
  // The client sends the conversation back with the response's content and the result.
  json body = first_body;
  body["messages"].push_back({{"role", "assistant"}, {"content", out.content()}});
  body["messages"].push_back(
      {{"role", "user"},
       {"content",
        json::array({{{"type", "tool_result"}, {"tool_use_id", out.content()[1]["id"]}, {"content", "sunny"}}})}});
  const MessagesRequest follow = parse_messages_request(body, kLimits);
  const std::vector<int32_t> second = render_prompt(follow, encode, turns, tail);
  std::vector<int32_t> before = first;
  before.insert(before.end(), call.begin(), call.end());
  ASSERT_GE(second.size(), before.size());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), second.begin())) << "turn 1's prompt and output, as they were";
  // The same content generated again with other ids: the latest are kept.
  std::vector<MessageIds> other = out.messages();
  other.back().ids.insert(other.back().ids.end() - 1, harmony::kEnd);
  turns.put(assistant_turn_key(assistant_messages(out.content(), "content")), other);
  EXPECT_EQ(turns.find(assistant_turn_key(assistant_messages(out.content(), "content")))->back().ids, other.back().ids);
  // Without the store, the text encoded again: the same prompt up to the call's arguments, not past them.
  const std::vector<int32_t> again = render_prompt(follow, encode, none, tail);
  EXPECT_FALSE(std::equal(before.begin(), before.end(), again.begin()));
  EXPECT_TRUE(std::equal(first.begin(), first.end(), again.begin()));
}

}  // namespace
}  // namespace tps
