// The server's pieces that span its APIs, without a network: the request
// counts' labels, and what a request of either API asks of its output
// becoming the engine's constraint spec.
#include <gtest/gtest.h>

#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "serve/chat/chat_request.h"
#include "serve/http/api_error.h"
#include "serve/metrics.h"
#include "serve/responses/responses_request.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using json = nlohmann::ordered_json;
using testing::test_tokenizer;

const ApiLimits kLimits{"gpt-oss-test", 256};

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
    const OutputConstraint c = parse_chat_request(json::parse(base + rest + "}"), kLimits).output;
    EXPECT_TRUE(c) << rest;
    return c.value_or(ConstraintSpec{});
  };
  // Strict tools hold their calls' arguments; the others' are held to
  // their parameters where the engine can (an empty object's, when they
  // have none).
  const ConstraintSpec automatic = spec(R"("reasoning_effort": "low")");
  EXPECT_EQ(automatic.form, ConstraintSpec::Form::harmony);
  EXPECT_EQ(automatic.content.kind, ContentSpec::Kind::text);
  EXPECT_EQ(automatic.reasoning_budget, 512);  // low's; the engine cuts it to the sequence's room
  ASSERT_EQ(automatic.tools.size(), 2u);
  EXPECT_TRUE(automatic.tools[0].strict);
  EXPECT_EQ(automatic.tools[0].arguments.schema["required"], json::array({"a"}));
  EXPECT_EQ(automatic.tools[0].arguments.param, "tools[0].function.parameters");
  EXPECT_FALSE(automatic.tools[1].strict);
  EXPECT_EQ(automatic.tools[1].arguments.schema["additionalProperties"], false);
  // A call is forced: no final answer; named: only that function.
  EXPECT_EQ(spec(R"("tool_choice": "required")").content.kind, ContentSpec::Kind::none);
  const ConstraintSpec named = spec(R"("tool_choice": {"type": "function", "function": {"name": "free"}})");
  EXPECT_EQ(named.content.kind, ContentSpec::Kind::none);
  ASSERT_EQ(named.tools.size(), 1u);
  EXPECT_EQ(named.tools[0].name, "free");
  // The answer's JSON; with tool_choice none, no function may be called.
  const ConstraintSpec schema = spec(R"("tool_choice": "none", "response_format": {"type": "json_schema", "json_schema":
      {"name": "n", "strict": true, "schema": {"type": "boolean"}}})");
  EXPECT_EQ(schema.content.kind, ContentSpec::Kind::json_schema);
  EXPECT_EQ(schema.content.schema, json({{"type", "boolean"}}));
  EXPECT_EQ(schema.content.param, "response_format.json_schema.schema");
  EXPECT_TRUE(schema.tools.empty());
  EXPECT_EQ(spec(R"("tool_choice": "none", "response_format": {"type": "json_object"})").content.kind,
            ContentSpec::Kind::json_object);
  // The written form the step plan carries reads back the same (params
  // are not carried: a spec is refused before it travels).
  const ConstraintSpec back = ConstraintSpec::parse(automatic.text());
  EXPECT_EQ(back.text(), automatic.text());
  EXPECT_EQ(back.tools[1].arguments.schema, automatic.tools[1].arguments.schema);
  EXPECT_TRUE(back.tools[0].arguments.param.empty());
  EXPECT_THROW(ConstraintSpec::parse(R"({"form": "raw"})"), InputError);
  // Nothing asked but a tool that is not strict: held, compiled once;
  // parameters the engine cannot hold leave the turn free.
  ConstraintCache cache(test_tokenizer());
  ChatRequest loose = parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}], "tools": [
      {"type": "function", "function": {"name": "free"}}], "response_format": {"type": "text"}})"),
                                         kLimits);
  check_output_constraint(loose.output, cache);
  ASSERT_TRUE(loose.output);
  EXPECT_TRUE(cache.get(*loose.output)->unheld_tools.empty());
  ChatRequest unheld = parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}], "tools": [
      {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}]})"),
                                          kLimits);
  ASSERT_TRUE(unheld.output);
  check_output_constraint(unheld.output, cache);
  EXPECT_FALSE(unheld.output);
  EXPECT_FALSE(parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), kLimits).output);
}

TEST(OutputConstraint, CompletionsHoldTheRawText) {
  const json body = json::parse(R"({"prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"name": "n", "schema": {"enum": [1, 2]}}}})");
  const OutputConstraint c = parse_completion_request(body, kLimits).output;
  ASSERT_TRUE(c);
  EXPECT_EQ(c->form, ConstraintSpec::Form::raw);
  EXPECT_EQ(c->content.schema, json::parse(R"({"enum": [1, 2]})"));
  EXPECT_FALSE(parse_completion_request(json::parse(R"({"prompt": "x"})"), kLimits).output);
}

// A schema keyword the grammar engine cannot honour is a 400 naming the
// request's parameter, the keyword and its path -- never ignored.
TEST(OutputConstraint, WhatCannotBeHonouredIsRefusedByParameterAndKeyword) {
  ConstraintCache cache(test_tokenizer());
  auto refused = [&](const std::string& body, const std::string& param, const std::string& words) {
    ChatRequest r = parse_chat_request(json::parse(body), kLimits);
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
  ChatRequest ok = parse_chat_request(
      json::parse(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})"),
      kLimits);
  EXPECT_NO_THROW(check_output_constraint(ok.output, cache));
}

}  // namespace
}  // namespace tps
