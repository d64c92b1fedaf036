// The Responses API without a network: input items read and refused by
// name, output items from generated tokens, follow-ups on the exact ids of
// earlier turns, and the store of responses.
#include <gtest/gtest.h>

#include "engine/text/conversation_ids.h"
#include "runtime/error.h"
#include "serve/http/api_error.h"
#include "serve/responses/response_store.h"
#include "serve/responses/responses_output.h"
#include "serve/responses/responses_request.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using json = nlohmann::ordered_json;
using testing::test_tokenizer;

const ApiLimits kLimits{"gpt-oss-test", 256};

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
  EXPECT_EQ(parse_responses_request(json::parse(R"({"input": "hi", "max_output_tokens": 32000})"), kLimits, "z")
                .max_new_tokens,
            256);  // the context's, then the room's (Server::submit)
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_EQ(r.conversation.reasoning, "high");
  EXPECT_EQ(r.conversation.instructions, "Be brief.");
  EXPECT_EQ(r.item_instructions, "Use tools.");
  EXPECT_EQ(r.conversation.functions, "type add = (_: {\na: number,\n}) => any;\n\n");
  ASSERT_TRUE(r.output);
  ASSERT_EQ(r.output->tools.size(), 1u);
  EXPECT_EQ(r.output->tools[0].name, "add");
  EXPECT_TRUE(r.output->tools[0].strict);        // its arguments held to its schema
  name_function_outputs(r, {{"c0", "lookup"}});  // c0: a call of the conversation before
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

// Codex's first request, in shape: function tools, a namespace of them, a
// hosted tool, and a follow-up's call of a namespaced function. The
// namespace is harmony's own (called as NS.NAME), the hosted tool left out
// and said.
TEST(ResponsesRequest, NamespacesAreHarmonyNamespacesAndHostedToolsAreLeftOut) {
  const ResponsesRequest r = parse_responses_request(json::parse(R"({
      "input": [{"type": "message", "role": "user", "content": "hi"},
                {"type": "function_call", "namespace": "agents", "name": "spawn", "call_id": "c1",
                 "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "done"},
                {"type": "function_call_output", "namespace": "agents", "name": "note", "output": "by name"}],
      "tool_choice": "auto", "parallel_tool_calls": true, "store": false, "prompt_cache_key": "k",
      "client_metadata": {"a": "b"}, "include": ["reasoning.encrypted_content"],
      "tools": [{"type": "function", "name": "exec", "strict": false,
                 "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
                {"type": "namespace", "name": "agents", "description": "Sub-agents.",
                 "tools": [{"type": "function", "name": "spawn", "description": "Start one.",
                            "parameters": {"type": "object", "properties": {}}}]},
                {"type": "web_search", "external_web_access": false}]})"),
                                                     kLimits, "x");
  EXPECT_NE(r.conversation.functions.find("type exec = (_: {"), std::string::npos) << r.conversation.functions;
  ASSERT_EQ(r.conversation.namespaces.size(), 1u);
  EXPECT_EQ(r.conversation.namespaces[0].name, "agents");
  EXPECT_EQ(r.conversation.namespaces[0].description, "Sub-agents.");
  EXPECT_NE(r.conversation.namespaces[0].body.find("type spawn = "), std::string::npos);
  EXPECT_EQ(r.omitted_tools, std::vector<std::string>{"web_search"});
  ASSERT_EQ(r.conversation.messages.size(), 4u);
  EXPECT_EQ(r.conversation.messages[1].recipient, "agents.spawn");
  EXPECT_EQ(r.conversation.messages[3].role, "agents.note");  // an output by the tool's name, no call_id
  EXPECT_EQ(r.input_calls.at("c1"), "agents.spawn");
  // The non-strict tool's arguments are held to its parameters where they
  // compile; the namespaced one is offered by its qualified name.
  ASSERT_TRUE(r.output);
  ASSERT_EQ(r.output->tools.size(), 2u);
  EXPECT_EQ(r.output->tools[1].name, "agents.spawn");
  for (const ConstraintSpec::Tool& t : r.output->tools) {
    EXPECT_FALSE(t.strict) << t.name;
    EXPECT_EQ(t.arguments.kind, ContentSpec::Kind::json_schema) << t.name;
  }
  // Rendered, the namespace follows `functions` in the developer message.
  std::string text;
  for (int32_t id :
       render_conversation(r.conversation, [](const std::string& s) { return test_tokenizer().encode(s); }))
    text += test_tokenizer().token_bytes(id);
  EXPECT_NE(text.find("} // namespace functions\n\n## agents\n\n// Sub-agents.\nnamespace agents {\n\n"),
            std::string::npos)
      << text;
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
  refused(R"({"input": "x", "tools": [{"type": "teleport"}]})", "tools[0].type");
  refused(R"({"input": "x", "tools": [{"type": "function"}]})", "tools[0].name");
  refused(R"({"input": "x", "tools": [{"type": "function", "name": "two words"}]})", "tools[0].name");
  refused(R"({"input": "x", "tools": [{"type": "function", "name": "a.b"}]})", "tools[0].name");
  refused(R"({"input": "x", "tools": [{"type": "namespace", "name": "ns"}]})", "tools[0].tools");
  refused(R"({"input": "x", "tools": [{"type": "namespace", "name": "ns", "tools": [{"type": "web_search"}]}]})",
          "tools[0].tools[0].type");
  refused(R"({"input": "x", "tool_choice": "required"})", "tool_choice");
  refused(R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", "text.format.schema");
  refused(R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format.type");
  refused(R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens");
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
  count.put("a", "", stored(10)), count.put("b", "", stored(10));
  EXPECT_NE(count.get("a", "", true), nullptr);  // a is now the more recent
  count.put("c", "", stored(10));
  EXPECT_EQ(count.get("b", "", true), nullptr);
  EXPECT_NE(count.get("a", "", false), nullptr);
  EXPECT_NE(count.get("c", "", false), nullptr);
  ResponseStoreStats s = count.stats();
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_TRUE(count.erase("a", ""));
  EXPECT_FALSE(count.erase("a", ""));
  EXPECT_EQ(count.stats().count, 1u);

  const size_t one = stored(1000)->bytes() + 1;
  ResponseStore bytes(100, 2 * one + one / 2);
  bytes.put("x", "", stored(1000)), bytes.put("y", "", stored(1000)), bytes.put("z", "", stored(1000));
  EXPECT_EQ(bytes.get("x", "", false), nullptr);
  EXPECT_NE(bytes.get("z", "", false), nullptr);
  EXPECT_LE(bytes.stats().bytes, 2 * one + one / 2);
  EXPECT_FALSE(bytes.put("huge", "", stored(100000)));
  EXPECT_NE(bytes.get("y", "", false), nullptr);  // nothing let go for it
}

// A response is its key's: another key neither reads nor deletes it, nor
// follows it up.
TEST(ResponseStore, AResponseIsReadOnlyByTheKeyThatMadeIt) {
  ResponseStore s(10, 1 << 20);
  s.put("r", "key-a", stored(10));
  EXPECT_EQ(s.get("r", "key-b", true), nullptr);
  EXPECT_EQ(s.get("r", "key-a-longer", true), nullptr);
  EXPECT_EQ(s.get("r", "", false), nullptr);
  EXPECT_FALSE(s.erase("r", "key-b"));
  EXPECT_NE(s.get("r", "key-a", true), nullptr);
  EXPECT_TRUE(s.erase("r", "key-a"));
}

// Deleted while it is generated: its generation is cancelled and it is
// never stored; one not deleted is stored when it ends; one that ends
// without a response (an error) leaves nothing behind.
TEST(ResponseStore, ADeleteWhileGeneratingCancelsAndNothingIsStored) {
  ResponseStore s(10, 1 << 20);
  int cancelled = 0;
  s.begin("r", "k", [&] { ++cancelled; });
  EXPECT_EQ(s.get("r", "k", false), nullptr);  // not stored yet
  EXPECT_FALSE(s.erase("r", "other"));
  EXPECT_EQ(cancelled, 0);
  EXPECT_TRUE(s.erase("r", "k"));
  EXPECT_EQ(cancelled, 1);
  EXPECT_FALSE(s.finish("r", stored(10)));
  EXPECT_EQ(s.get("r", "k", false), nullptr);
  s.begin("q", "k", [&] { ++cancelled; });
  EXPECT_TRUE(s.finish("q", stored(10)));
  EXPECT_NE(s.get("q", "k", false), nullptr);
  EXPECT_TRUE(s.erase("q", "k"));
  EXPECT_EQ(cancelled, 1);  // a stored one is only deleted
  s.begin("e", "k", [] {});
  EXPECT_FALSE(s.finish("e", nullptr));
  EXPECT_FALSE(s.erase("e", "k"));
  EXPECT_EQ(s.stats().count, 0u);
}

}  // namespace
}  // namespace tps
