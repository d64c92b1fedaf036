// Constrained decoding's engine (engine/grammar): grammars, the matcher's
// masks against brute force over the whole o200k vocabulary, JSON Schema's
// keywords each on texts that must and must not match, and refusals that
// name the keyword and its path.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/harmony_turn.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_text.h"
#include "engine/grammar/matcher.h"
#include "engine/grammar/pattern.h"
#include "runtime/error.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const TokenIndex> index() {
  static const auto i = std::make_shared<const TokenIndex>(testing::test_tokenizer());
  return i;
}

std::shared_ptr<const CompiledGrammar> compiled(Grammar g, int start) {
  return compile_grammar(std::move(g), start, index(), {testing::test_tokenizer().special_id("<|return|>").value()});
}

std::shared_ptr<const CompiledGrammar> schema(const std::string& text) {
  Grammar g;
  const int r = add_json_schema(g, json::parse(text));
  return compiled(std::move(g), r);
}

// Feeds text as the tokenizer splits it; true when every token is taken
// and the text is a whole match.
bool matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  for (int32_t id : testing::test_tokenizer().encode(text))
    if (!m.accept(id)) return false;
  return m.complete();
}

// The mask equals, token by token, whether the matcher takes the token.
void expect_mask_is_exact(Matcher& m, const std::string& what) {
  const TokenSet& mask = m.allowed();
  const int32_t vocab = index()->vocab();
  int32_t allowed = 0;
  for (int32_t id = 0; id < vocab; ++id) {
    const bool takes = m.accepts(id);
    ASSERT_EQ(mask.test(id), takes) << what << ": token " << id << " '" << testing::test_tokenizer().token_bytes(id)
                                    << "'";
    allowed += takes;
  }
  EXPECT_EQ(mask.count(), allowed);
}

TEST(Grammar, LeftRecursionAndEmptyRulesAreRefused) {
  Grammar g;
  const int a = g.declare("a");
  g.add_alternative(a, {Grammar::rule(a), g.byte('x')});
  EXPECT_THROW(g.finish(a), InputError);
  Grammar h;
  const int b = h.declare("b");
  EXPECT_THROW(h.finish(b), InputError);
}

TEST(Grammar, MasksEqualBruteForceAlongAText) {
  // Free text inside a JSON string, a closed string, structure, a number.
  auto g = schema(R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},
                      "required":["name","n"],"additionalProperties":false})");
  const std::string text = R"({"name": "Ada Lovelace, \u00e9 \"q\"", "n": -42})";
  Matcher m(g);
  std::vector<int32_t> ids = testing::test_tokenizer().encode(text);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % 3 == 0) expect_mask_is_exact(m, "after " + std::to_string(i) + " tokens");
    ASSERT_TRUE(m.accept(ids[i])) << "token " << i;
  }
  EXPECT_TRUE(m.complete());
  expect_mask_is_exact(m, "complete");
}

TEST(Grammar, RandomWalksNeverMeetAnEmptyMask) {
  auto g = schema(R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":5},
                      "maxItems":3},"ok":{"type":"boolean"},"x":{"type":"number","minimum":-5,"maximum":5}},
                      "required":["ok"]})");
  std::mt19937 rng(7);
  for (int walk = 0; walk < 20; ++walk) {
    Matcher m(g);
    for (int step = 0; step < 60 && !m.complete(); ++step) {
      const TokenSet& mask = m.allowed();
      ASSERT_GT(mask.count(), 0) << "walk " << walk << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < index()->vocab(); ++id)
        if (mask.test(id)) allowed.push_back(id);
      ASSERT_TRUE(m.accept(allowed[rng() % allowed.size()]));
    }
  }
}

TEST(JsonSchema, EachKeywordAcceptsWhatItAllowsAndNothingElse) {
  struct Case {
    const char* schema;
    std::vector<const char*> valid, invalid;
  };
  const std::vector<Case> cases = {
      {R"({"type":"string"})", {R"("")", R"("héllo \n \u0041")"}, {"1", R"("a)", "\"\x01\""}},
      {R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("aéb")"}, {R"("a")", R"("abcd")"}},
      {R"({"type":"integer","minimum":-3,"exclusiveMaximum":120})",
       {"-3", "0", "119", "57"},
       {"-4", "120", "1.5", "007"}},
      {R"({"type":"number","minimum":0,"maximum":1})", {"0", "0.25", "1", "0.999"}, {"-0.5", "1.5", "2", "1e0"}},
      {R"({"type":"number"})", {"-12.5e+3", "0", "3.25"}, {"01", "+1", ".5"}},
      {R"({"enum":["a",1,null,{"k":[true]}]})", {R"("a")", "1", "null", R"({"k":[true]})"}, {R"("b")", "2"}},
      {R"({"const":"x\"y"})", {R"("x\"y")"}, {R"("xy")"}},
      {R"({"type":["integer","null"]})", {"5", "null"}, {"true"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})",
       {"[1]", "[1, 2]"},
       {"[]", "[1,2,3]", R"(["a"])"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {R"(["a", 1])", R"(["a"])", "[]"},
       {R"(["a", 1, 2])", R"([1])"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]})",
       {R"({"a": 1, "b": "x"})", R"({"b":"x"})"},
       {R"({"a": 1})", R"({"b":"x","c":1})", "{}"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {"{}", R"({"x": 1, "y": 2})"},
       {R"({"x":"s"})"}},
      {R"({"anyOf":[{"type":"string"},{"type":"integer"}]})", {R"("s")", "3"}, {"[]"}},
      {R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},
                    {"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]})",
       {R"({"kind":"a","x":1})", R"({"kind":"b"})"},
       {R"({"kind":"c"})"}},
      {R"({"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"null"}}}]})",
       {R"({"a":1})", R"({"a":1,"b":null})"},
       {R"({"b":null})"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
                    "required":["next"]}},"$ref":"#/$defs/node"})",
       {R"({"next":null})", R"({"next":{"next":{"next":null}}})"},
       {R"({"next":1})"}},
      {R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})",
       {R"("AB-123")"},
       {R"("AB-12")", R"("ab-123")", R"("xAB-123")"}},
      {R"({"type":"string","pattern":"cat"})", {R"("cat")", R"("a cat!")"}, {R"("dog")"}},
      {R"({"type":"string","pattern":"^$|^\\d{2}$"})", {R"("")", R"("12")"}, {R"("1")", R"("a12")"}},
      {R"({"type":"string","pattern":"^ab|cd$"})", {R"("abx")", R"("xcd")"}, {R"("xab")", R"("cdx")"}},
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-28")", R"("1999-12-31")"},
       {R"("2024-02-30")", R"("24-01-01")"}},
      {R"({"type":"string","format":"date-time"})",
       {R"("2024-01-02T03:04:05Z")", R"("2024-01-02T03:04:05.5+01:00")"},
       {R"("2024-01-02 03:04:05Z")"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
      {R"({"type":"string","format":"email"})", {R"("a.b@example.com")"}, {R"("a@b")", R"("@x.com")"}},
      {"true", {"1", R"({"a":[null]})"}, {"nul"}},
      // const and enum with the keywords beside them: only values all of
      // them accept.
      {R"({"type":"string","enum":["a","bbbb",3,"cc"],"maxLength":2})", {R"("a")", R"("cc")"}, {R"("bbbb")", "3"}},
      {R"({"enum":["x","y",1],"const":"y"})", {R"("y")"}, {R"("x")", "1"}},
      {R"({"type":"integer","enum":[1,5,100],"minimum":2,"maximum":99})", {"5"}, {"1", "100"}},
      {R"({"enum":["AB-1","ab-1","AB-12"],"pattern":"^[A-Z]{2}-\\d$"})", {R"("AB-1")"}, {R"("ab-1")", R"("AB-12")"}},
      // A repetition of something that can match nothing: the same strings.
      {R"({"type":"string","pattern":"^(a*)*$"})", {R"("")", R"("aaa")"}, {R"("ab")"}},
      {R"({"type":"string","pattern":"^(a?b?|c)+$"})", {R"("")", R"("abcba")", R"("c")"}, {R"("d")", R"("ad")"}},
      {R"({"type":"string","pattern":"^(x(y?)*|())*z$"})", {R"("z")", R"("xyyxz")"}, {R"("yz")", R"("zz")"}},
      // An integer bound below the smallest written is no bound; so is a
      // number's beyond the largest (JavaScript's largest safe integer).
      {R"({"type":"integer","minimum":-1e308,"maximum":3})", {"-5", "3"}, {"4"}},
      {R"({"type":"number","maximum":9007199254740991})", {"5", "-3.5"}, {"x"}},
      // A required property 'properties' does not list: any value.
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a","b"]})",
       {R"({"a": 1, "b": "x"})", R"({"a":1,"b":[null]})"},
       {R"({"a": 1})"}},
      // pattern and format with lengths: strings of both.
      {R"({"type":"string","pattern":"^[a-z]+$","maxLength":3})", {R"("abc")", R"("a")"}, {R"("abcd")", R"("")"}},
      {R"({"type":"string","pattern":"^[a-z]*$","minLength":2})", {R"("ab")", R"("abcdef")"}, {R"("a")", R"("")"}},
      {R"({"type":"string","pattern":"cat","maxLength":5})", {R"("cat")", R"("xcaty")"}, {R"("a cat!")", R"("dog")"}},
      {R"({"type":"string","pattern":"^(ab|c)+-\\d{2}$","minLength":6,"maxLength":8})",
       {R"("ccc-12")", R"("ccccc-12")"},
       {R"("c-12")", R"("ababab-12")"}},
      {R"({"type":"string","format":"date","maxLength":10})", {R"("2024-02-28")"}, {R"("2024-02-2")"}},
      // Names by pattern, the number of members, a tuple's further items.
      {R"({"type":"object","patternProperties":{"^x-[a-z]+$":{"type":"integer"}}})",
       {"{}", R"({"x-a": 1, "x-bc": 2})"},
       {R"({"x-a": "s"})", R"({"y": 1})"}},
      {R"({"type":"object","properties":{"x-a":{"minimum":3}},"patternProperties":{"^x-":{"type":"integer"}}})",
       {R"({"x-a": 3})"},
       {R"({"x-a": 3.5})", R"({"x-a": 2})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"minProperties":1})",
       {R"({"a": 1})", R"({"a": 1, "b": 2})"},
       {"{}"}},
      {R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"required":["c"],"maxProperties":2})",
       {R"({"c": 1})", R"({"a": 1, "c": 2})"},
       {R"({"a": 1, "b": 1, "c": 1})"}},
      {R"({"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"integer"}})",
       {R"(["a"])", R"(["a", 1, 2])"},
       {R"(["a", "b"])"}},
      {R"({"type":"string","format":"ipv4"})", {R"("192.168.0.1")"}, {R"("256.1.1.1")", R"("1.2.3")"}},
      {R"({"type":"string","format":"hostname"})", {R"("example.com")", R"("a-b.c")"}, {R"("-a.com")", R"("a..b")"}},
      {R"({"type":"string","format":"uri"})", {R"("https://example.com/a/b.html")"}, {R"("example.com")"}},
      {R"({"type":"string","format":"color"})", {R"("anything")"}, {"1"}},  // not JSON Schema's: an annotation
      // multipleOf a power of ten: that many fraction digits at most.
      {R"({"type":"number","multipleOf":0.01,"minimum":0})", {"12", "0.5", "3.25"}, {"0.125", "1e-3", "-1"}},
      {R"({"type":"integer","multipleOf":1})", {"7"}, {"7.5"}},
      // oneOf whose branches may both match: held as anyOf.
      {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", {"1", "1.5"}, {R"("1")"}},
  };
  for (const Case& c : cases) {
    auto g = schema(c.schema);
    for (const char* text : c.valid) EXPECT_TRUE(matches(g, text)) << c.schema << " should take " << text;
    for (const char* text : c.invalid) EXPECT_FALSE(matches(g, text)) << c.schema << " should refuse " << text;
  }
}

// Whether a text matches two or more of a oneOf's branches (each with the
// keywords beside the oneOf): invalid for JSON Schema, and taken by tps,
// which holds a oneOf as anyOf (a grammar cannot count the branches a text
// matches).
bool matches_several_branches(const json& s, const std::string& text) {
  if (!s.is_object() || !s.contains("oneOf")) return false;
  int matched = 0;
  for (const json& branch : s["oneOf"]) {
    json one = s;
    one.erase("oneOf");
    one["allOf"] = json::array({branch});
    try {
      matched += matches(schema(one.dump()), text);
    } catch (const InputError&) {
    }
  }
  return matched >= 2;
}

// JSON-Schema-Test-Suite (Debian's json-schema-test-suite, draft 7): a
// grammar may take fewer texts than its schema allows (members in schema
// order, no additional members unless asked), never one the suite calls
// invalid but a text that matches several branches of a oneOf. Its valid data shows how much a grammar takes of what it
// could.
TEST(JsonSchema, NeverTakesWhatTheTestSuiteCallsInvalid) {
  const std::filesystem::path suite = "/usr/share/json-schema-test-suite/tests/draft7";
  ASSERT_TRUE(std::filesystem::is_directory(suite))
      << suite << ": install json-schema-test-suite (scripts/install-deps)";
  int schemas = 0, refused = 0, invalid = 0, valid = 0, valid_taken = 0;
  for (const auto& file : std::filesystem::directory_iterator(suite)) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    for (const json& group : json::parse(in)) {
      ++schemas;
      std::shared_ptr<const CompiledGrammar> g;
      try {
        g = schema(group["schema"].dump());
      } catch (const InputError&) {
        ++refused;
        continue;
      }
      for (const json& t : group["tests"]) {
        const std::string text = t["data"].dump();
        if (t["valid"].get<bool>()) {
          ++valid, valid_taken += matches(g, text);
        } else if (!matches_several_branches(group["schema"], text)) {  // oneOf held as anyOf
          ++invalid;
          EXPECT_FALSE(matches(g, text)) << file.path().filename() << ": " << group["description"] << " / "
                                         << t["description"] << ": " << text;
        }
      }
    }
  }
  std::printf("draft 7: %d schemas, %d refused; %d invalid texts refused; %d of %d valid texts taken\n", schemas,
              refused, invalid, valid_taken, valid);
  // Measured: 75 of 124 schemas honoured (the rest use not, if/then/else,
  // dependencies, remote references ... by design of the suite, or match
  // nothing at all), 100 of 145 valid texts taken, all 121 invalid ones
  // refused but those of several oneOf branches.
  EXPECT_GE(schemas - refused, 75);
}

TEST(JsonSchema, WhatItCannotHonourIsRefusedByKeywordAndPath) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})",
       "schema at /properties/a: 'not' is not supported"},
      {R"({"type":"array","uniqueItems":true})", "schema at /: 'uniqueItems' is not supported"},
      {R"({"type":"number","minimum":0.5})", "minimum 0.5"},
      {R"({"$ref":"https://example.com/s.json"})", "only references inside the document"},
      {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreference"},
      {R"({"type":"string","format":"ipv6"})", "format 'ipv6' is not supported"},
      {R"({"type":"thing"})", "is not a JSON Schema type"},
      {R"({"type":"string","maxLength":2000000})", "'maxLength' above"},
      {R"({"type":"object","required":["a"],"additionalProperties":false})",
       "required property 'a' is not in 'properties' and 'additionalProperties' is false"},
      {R"({"type":"string","format":"date","maxLength":9})", "with lengths 0 to 9: no way found"},
      {R"({"type":"string","pattern":"^(a?)+$","minLength":3})", "with lengths 3 to any: no way found"},
      {R"({"type":"object","properties":{"a":{}},"minProperties":2})", "'minProperties' 2: fewer properties"},
      {R"({"type":"integer","multipleOf":5})", "'multipleOf' 5 is not supported"},
      {R"({"type":"object","required":["a","b"],"properties":{"a":{},"b":{}},"maxProperties":1})",
       "more properties required than 'maxProperties'"},
      {R"({"type":"object","patternProperties":{"^x":{}},"additionalProperties":true})",
       "'patternProperties' beside 'additionalProperties' other than false"},
      {"false", "accepts nothing"},
      // Bounds past the integers written are refused, not dropped.
      {R"({"type":"integer","minimum":1e308})", "schema at /: 'minimum' 1e+308 on an integer"},
      {R"({"type":"integer","exclusiveMaximum":-1e16})", "'exclusiveMaximum' -1e+16 on an integer"},
      // const and enum that nothing beside them accepts.
      {R"({"type":"string","const":5})", "schema at /: no value of 'const' satisfies the keywords beside it"},
      {R"({"properties":{"e":{"enum":["abc"],"maxLength":2}}})", "schema at /properties/e: no value of 'enum'"},
      // In the request's words, not the grammar's rule names.
      {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})",
       "schema at /: refers to itself before any text"},
      {R"x({"type":"string","pattern":"((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))"})x",
       "groups nested more than 64 deep"},
  };
  for (const auto& [text, message] : cases) {
    Grammar g;
    try {
      g.finish(add_json_schema(g, json::parse(text)));
      ADD_FAILURE() << text << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << text << ": " << e.what();
    }
  }
}

// Texts with harmony's special tokens written out, as the model would emit them.
bool turn_matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  for (int32_t id : testing::test_tokenizer().encode(text, /*parse_special=*/true))
    if (!m.accept(id)) return false;
  return m.complete();
}

TEST(HarmonyTurn, HoldsChannelsAndAnswersToWhatTheRequestAllows) {
  const Tokenizer& tok = testing::test_tokenizer();
  const std::string think = "<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant";
  const std::string json_final = "<|channel|>final<|message|>{\"a\": 1}<|return|>";
  const std::string call =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
      "\"Oslo\"}<|call|>";
  auto turn = [&](bool final_answer, bool with_tool, bool schema) {
    Grammar g;
    HarmonyTurn t;
    t.final_answer = final_answer;
    if (schema)
      t.final_content = add_json_schema(g, json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},
                                                           "required":["a"]})"));
    if (with_tool)
      t.tools.push_back({"get_weather", add_json_schema(g, json::parse(R"({"type":"object","properties":{"city":
                                                                           {"type":"string"}},"required":["city"]})"))});
    const int start = add_harmony_turn(g, tok, t);
    return compiled(std::move(g), start);
  };
  auto structured = turn(true, false, true);
  EXPECT_TRUE(turn_matches(structured, think + json_final));
  EXPECT_TRUE(turn_matches(structured, json_final));
  EXPECT_FALSE(turn_matches(structured, "<|channel|>final<|message|>{\"a\": \"x\"}<|return|>"));
  EXPECT_FALSE(turn_matches(structured, call));
  auto required = turn(false, true, false);
  EXPECT_TRUE(turn_matches(required, think + call));
  EXPECT_FALSE(turn_matches(required, json_final));
  EXPECT_FALSE(turn_matches(required,
                            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                            "{\"town\": \"Oslo\"}<|call|>"));
  auto free = turn(true, true, false);
  EXPECT_TRUE(turn_matches(free, "<|channel|>final<|message|>Any text at all.<|return|>"));
  EXPECT_TRUE(turn_matches(free, call));
  // The turn opens with a channel, and the analysis ends only with <|end|>.
  Matcher m(structured);
  const TokenSet& first = m.allowed();
  EXPECT_EQ(first.count(), 1);
  EXPECT_TRUE(first.test(tok.special_id("<|channel|>").value()));
  for (int32_t id : tok.encode("<|channel|>analysis<|message|>Hmm", true)) ASSERT_TRUE(m.accept(id));
  EXPECT_TRUE(m.allowed().test(tok.special_id("<|end|>").value()));
  EXPECT_FALSE(m.allowed().test(tok.special_id("<|return|>").value()));
  expect_mask_is_exact(m, "in the analysis");
}

// The shortest match of a rule, in bytes and special tokens: what the
// analysis budget leaves room for (engine/sched/constraint.h).
TEST(Grammar, ShortestMatchCountsBytesTokensAndLoopWords) {
  Grammar g;
  const int digits = g.declare("digits");  // [0-9]+ by recursion
  ByteSet digit;
  for (char c = '0'; c <= '9'; ++c) digit.set(static_cast<uint8_t>(c));
  g.add_alternative(digits, {g.bytes(digit), Grammar::rule(digits)});
  g.add_alternative(digits, {g.bytes(digit)});
  ByteDfa ab;  // words "ab"
  const int s0 = ab.add_state(false), s1 = ab.add_state(false), s2 = ab.add_state(true);
  for (auto& row : ab.next) row.fill(-1);
  ab.next[s0]['a'] = static_cast<int16_t>(s1), ab.next[s1]['b'] = static_cast<int16_t>(s2);
  ab.next[s2]['a'] = static_cast<int16_t>(s1);
  const int root = g.declare("root");
  g.add_alternative(root, {Grammar::token(7), Grammar::rule(digits), g.loop(ab, 2, 5)});
  g.add_alternative(root, {Grammar::rule(g.literal("a much longer way to say it"))});
  g.finish(root);
  EXPECT_EQ(g.shortest(digits), 1u);
  EXPECT_EQ(g.shortest(root), 1u + 1u + 2u * 2u);
}

TEST(HarmonyTurn, ItsShortestMatchIsTheShortestAnswerWithoutAnalysis) {
  const Tokenizer& tok = testing::test_tokenizer();
  Grammar g;
  HarmonyTurn t;
  t.final_answer = false;
  t.tools.push_back({"f", add_json_schema(g, json::parse(R"({"enum": [1, 22]})"))});
  const int start = add_harmony_turn(g, tok, t);
  auto c = compiled(std::move(g), start);
  // <|channel|> "commentary to=functions.f " <|constrain|> "json" <|message|> "1" <|call|>
  EXPECT_EQ(c->grammar.shortest(c->grammar.start()), 1u + 26u + 1u + 4u + 1u + 1u + 1u);
}

TEST(JsonSchema, SpecialTokensAndEndTokensComeOnlyWhereTheGrammarSaysSo) {
  const Tokenizer& tok = testing::test_tokenizer();
  const int32_t end = tok.special_id("<|end|>").value(), ret = tok.special_id("<|return|>").value();
  auto g = schema(R"({"type":"boolean"})");
  Matcher m(g);
  EXPECT_FALSE(m.allowed().test(end));
  EXPECT_FALSE(m.allowed().test(ret));
  for (int32_t id : tok.encode("true")) ASSERT_TRUE(m.accept(id));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.allowed().test(ret));  // the end token, once whole
  EXPECT_FALSE(m.accept(end));
  EXPECT_TRUE(m.accept(ret));
}

std::shared_ptr<const CompiledGrammar> gbnf(const std::string& text) {
  Grammar g;
  const int root = add_gbnf(g, text, "test.gbnf");
  return compiled(std::move(g), root);
}

// llama.cpp's notation: rules over lines, literals and classes with their
// escapes, groups, every repetition, comments; UTF-8 characters whole.
TEST(Gbnf, EachConstructAcceptsWhatItAllowsAndNothingElse) {
  auto list = gbnf(R"(# a list of answers
root   ::= answer ("," " "? answer){0,2}
answer ::= "yes" | "no" | [0-9]{1,3} | name | "\"" [^"\\\n]* "\""
name   ::= [a-zA-Z_] [a-zA-Z0-9_\-]*   # trailing comment
)");
  for (const char* ok : {"yes", "no, 42", "abc_1,yes, \"q x\"", "7,8,9", "\"\""}) EXPECT_TRUE(matches(list, ok)) << ok;
  for (const char* bad : {"", "maybe!", "1234", "yes,no,yes,no", "\"a\nb\"", "yes,", "-x"})
    EXPECT_FALSE(matches(list, bad)) << bad;
  // Multi-line groups, + and ?, escapes of every kind, a class of non-ASCII
  // ranges and '.' as one whole character.
  auto chars = gbnf("root ::= (\n  \"\\x41\" | \"\\u00e9\" | \"\\U0001F600\"\n)+ [α-ω]? .\n");
  EXPECT_TRUE(matches(chars, "Aé😀β€"));
  EXPECT_TRUE(matches(chars, "AA!"));
  EXPECT_FALSE(matches(chars, "Aé😀ββ€"));
  EXPECT_FALSE(matches(chars, "B!"));
  auto negated = gbnf(R"(root ::= [^a-z]{2})");
  EXPECT_TRUE(matches(negated, "Zé"));
  EXPECT_TRUE(matches(negated, "€😀"));
  EXPECT_FALSE(matches(negated, "Za"));
}

// UTF-8's byte ranges at every edge of its encodings: each code point of a
// class that spans them is taken, its neighbours outside are not.
TEST(Gbnf, ClassesAcrossUtf8EncodingLengthsTakeExactlyTheirCharacters) {
  auto g = gbnf(R"(root ::= [\x7e-\u0801\uffee-\U00010002])");
  auto one = [&](uint32_t c) {
    std::string s;
    if (c < 0x80)
      s += char(c);
    else if (c < 0x800)
      s += char(0xC0 | c >> 6), s += char(0x80 | (c & 0x3F));
    else if (c < 0x10000)
      s += char(0xE0 | c >> 12), s += char(0x80 | (c >> 6 & 0x3F)), s += char(0x80 | (c & 0x3F));
    else
      s += char(0xF0 | c >> 18), s += char(0x80 | (c >> 12 & 0x3F)), s += char(0x80 | (c >> 6 & 0x3F)),
          s += char(0x80 | (c & 0x3F));
    return s;
  };
  for (uint32_t c : {0x7e, 0x7f, 0x80, 0x7ff, 0x800, 0x801, 0xffee, 0xffff, 0x10000, 0x10002})
    EXPECT_TRUE(matches(g, one(c))) << std::hex << c;
  for (uint32_t c : {0x7d, 0x802, 0xfff, 0xffed, 0x10003, 0x20000}) EXPECT_FALSE(matches(g, one(c))) << std::hex << c;
}

TEST(Gbnf, MistakesAreRefusedByLine) {
  auto refused = [](const std::string& text, const std::string& words) {
    Grammar g;
    try {
      g.finish(add_gbnf(g, text, "test.gbnf"));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("root ::= \"a\" b\n", "line 1: rule 'b' is used but never defined");
  refused("a ::= \"x\"\n", "no rule 'root'");
  refused("root ::= \"a\"\nroot ::= \"b\"\n", "line 2: rule 'root' is defined twice");
  refused("root ::= \"a\n", "closing '\"'");
  refused("root ::= [ab\n", "closing ']'");
  refused("root ::= (\"a\"\n", "closing ')'");
  refused("root ::= [z-a]\n", "end comes before its start");
  refused("root ::= \"a\"{1001}\n", "over 1000");
  refused("root ::= \"a\"{3,2}\n", "reversed");
  refused("root ::= <|end|>\n", "token references");
  refused("root ::= \"\\q\"\n", "unknown escape");
  refused("root = \"a\"\n", "expected '::='");
  refused("root ::= root \"a\" | \"b\"\n", "rule 'root' (line 1): refers to itself before any text");
}

// What a request can make the matcher do is bounded: a grammar whose first
// tokens cost more than a token's work limit is refused at compile, naming
// where in the schema it comes from; one that is costly only later gives
// up at that token, within the limit, and the matcher stays usable.
std::string refusal_of(const std::string& text) {
  try {
    schema(text);
  } catch (const GrammarTooCostly& e) {
    return e.what();
  }
  return "";
}

TEST(Matcher, GrammarsTooCostlyAreRefusedByWhereTheyComeFrom) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"string","pattern":"(.*){200}"})", "schema at /: 'pattern': too costly to follow"},
      {R"({"type":"object","properties":{"a":{"type":"string","pattern":"(.*){200}"}},"required":["a"]})",
       "schema at /properties/a: 'pattern': too costly to follow"},
      {R"({"type":"array","items":{"type":"string","pattern":"(.*){200}"},"maxItems":1000})",
       "schema at /items: 'pattern': too costly to follow"},
  };
  for (const auto& [text, message] : cases) {
    const auto start = std::chrono::steady_clock::now();
    const std::string what = refusal_of(text);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(what.find(message), std::string::npos) << text.substr(0, 80) << ": '" << what << "'";
    std::printf("%.60s: refused in %.3f s\n", text.c_str(), seconds);
  }
}

TEST(JsonSchema, AnEnumOfThousandsOfStringsCostsAMaskWhatOneDoes) {
  json values = json::array();
  for (int i = 0; i < 20000; ++i) values.push_back(cat("a shared prefix that is long ", i * 7919 % 100003));
  auto g = schema(json{{"enum", values}}.dump());
  Matcher m(g);
  uint64_t heaviest = 0;
  for (int32_t id : testing::test_tokenizer().encode(values[123].dump())) {
    m.allowed();
    heaviest = std::max(heaviest, m.work());
    ASSERT_TRUE(m.accept(id));
  }
  EXPECT_TRUE(m.complete());
  EXPECT_LT(heaviest, Matcher::kWorkPerToken / 20);
  EXPECT_FALSE(matches(g, R"("a shared prefix that is long 100003")"));
  // Past the grammar's size bound: refused at once, by keyword.
  json more = json::array();
  for (int i = 0; i < 100000; ++i) more.push_back(cat("value number ", i));
  Grammar big;
  EXPECT_THROW(
      {
        try {
          add_json_schema(big, json{{"enum", more}});
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("schema at /: 'enum' makes a grammar of over"), std::string::npos)
              << e.what();
          throw;
        }
      },
      InputError);
}

TEST(Matcher, AGrammarCostlyLaterGivesUpAtThatTokenAndStaysUsable) {
  // The costly part sits past the tokens the compile probe follows (a
  // grammar made by hand has no probe but its start).
  const std::string digits = "1234567890123456789012345678901234567890";
  Grammar g;
  JsonText text(g);
  int tail;
  {
    OriginScope origin(g, "the costly part");
    tail = pattern_rule(g, text, "(.*){200}", "the costly part");
  }
  auto c = compiled(std::move(g), g.sequence("root", {Grammar::rule(g.literal(digits)), Grammar::rule(tail)}));
  Matcher m(c);
  const std::vector<int32_t> ids = testing::test_tokenizer().encode(digits);
  size_t taken = 0;
  try {
    for (; taken <= ids.size(); ++taken) {
      m.allowed();
      if (taken < ids.size()) {
        ASSERT_TRUE(m.accept(ids[taken]));
      }
    }
    FAIL() << "no mask passed the limit";
  } catch (const GrammarTooCostly& e) {
    EXPECT_NE(std::string(e.what()).find("the costly part: too costly"), std::string::npos) << e.what();
    EXPECT_GT(taken, 4u);  // past what the compile probe follows
    EXPECT_LE(m.work(), Matcher::kWorkPerToken + Matcher::kWorkPerToken / 10);
  }
  // Still usable: it takes the rest of the text, one token at a time.
  for (; taken < ids.size(); ++taken) EXPECT_TRUE(m.accept(ids[taken]));
  EXPECT_TRUE(m.accept(testing::test_tokenizer().encode("abc")[0]));
}

// The limit is far above what real schemas need: the heaviest mask of a
// walk through the test suite's schemas, measured.
TEST(Matcher, RealSchemasStayFarBelowTheWorkLimit) {
  const std::filesystem::path suite = "/usr/share/json-schema-test-suite/tests/draft7";
  uint64_t heaviest = 0;
  std::string where;
  double seconds = 0;
  for (const auto& file : std::filesystem::directory_iterator(suite)) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    for (const json& group : json::parse(in)) {
      std::shared_ptr<const CompiledGrammar> g;
      try {
        g = schema(group["schema"].dump());
      } catch (const InputError&) {
        continue;
      }
      for (const json& t : group["tests"]) {
        Matcher m(g);
        for (int32_t id : testing::test_tokenizer().encode(t["data"].dump())) {
          const auto start = std::chrono::steady_clock::now();
          m.allowed();
          if (m.work() > heaviest) {
            heaviest = m.work(), where = file.path().filename().string();
            seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          }
          if (!m.accept(id)) break;
        }
      }
    }
  }
  std::printf("heaviest mask: %llu steps (%s, %.4f s)\n", static_cast<unsigned long long>(heaviest), where.c_str(),
              seconds);
  EXPECT_LT(heaviest, Matcher::kWorkPerToken / 10);
}

}  // namespace
}  // namespace tps
