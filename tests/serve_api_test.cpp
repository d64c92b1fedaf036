// What every API of the server shares, without a network: tools rendered as
// harmony's functions namespace, request bodies parsed with bounds, API
// keys, and ids.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>

#include "runtime/error.h"
#include "serve/api/generation_request.h"
#include "serve/api/random_id.h"
#include "serve/api/tool_schema.h"
#include "serve/http/api_error.h"
#include "serve/http/api_keys.h"

namespace tps {
namespace {

using json = nlohmann::ordered_json;

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

// A key is taken whole, from either header, the Bearer scheme in any case
// (RFC 9110); a key's prefix, a longer key or another scheme is not it.
TEST(ApiKeys, OneOfTheKeysWholeAdmitsARequest) {
  const ApiKeys keys({"sk-first", "sk-second"});
  auto with = [](const char* header, const char* value) {
    httplib::Request req;
    req.headers.emplace(header, value);
    return req;
  };
  EXPECT_TRUE(keys.admits(with("Authorization", "Bearer sk-first")));
  EXPECT_TRUE(keys.admits(with("Authorization", "bearer sk-second")));
  EXPECT_TRUE(keys.admits(with("Authorization", "BEARER   sk-first ")));
  EXPECT_TRUE(keys.admits(with("x-api-key", "sk-second")));
  EXPECT_FALSE(keys.admits(with("Authorization", "Bearer sk-firs")));
  EXPECT_FALSE(keys.admits(with("Authorization", "Bearer sk-first2")));
  EXPECT_FALSE(keys.admits(with("Authorization", "Basic sk-first")));
  EXPECT_FALSE(keys.admits(with("Authorization", "sk-first")));
  EXPECT_FALSE(keys.admits(with("x-api-key", "")));
  EXPECT_FALSE(keys.admits(httplib::Request()));
  EXPECT_EQ(keys.owner(with("x-api-key", "sk-second")), "sk-second");
  EXPECT_EQ(ApiKeys().owner(with("x-api-key", "anything")), "");  // no keys: one owner
}

TEST(ApiKeys, AFileGivesOneKeyALine) {
  const std::string path = testing::TempDir() + "keys.txt";
  std::ofstream(path) << "# team keys\nsk-a\n\n  sk-b  \r\n";
  EXPECT_EQ(read_api_keys(path), (std::vector<std::string>{"sk-a", "sk-b"}));
  std::ofstream(path) << "# none\n\n";
  EXPECT_THROW(read_api_keys(path), InputError);
  std::remove(path.c_str());
  EXPECT_THROW(read_api_keys(path), InputError);
  EXPECT_THROW(read_api_keys(testing::TempDir()), InputError);  // a directory
}

// 128 random bits: no two alike, none guessable from another.
TEST(RandomId, IsThirtyTwoHexDigitsAndNeverRepeats) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    const std::string id = random_id();
    ASSERT_EQ(id.size(), 32u);
    ASSERT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ASSERT_TRUE(seen.insert(id).second);
  }
}

}  // namespace
}  // namespace tps
