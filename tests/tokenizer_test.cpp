// The o200k_harmony tokenizer: the vocabulary built from tiktoken's ranks,
// known encodings (spec §7.3), special tokens, invalid UTF-8, decoding and
// streaming of characters split across tokens.
#include <gtest/gtest.h>

#include "engine/harmony.h"
#include "engine/o200k_vocab.h"
#include "engine/tokenizer.h"
#include "runtime/error.h"

namespace tps {
namespace {

const Vocab& vocab() {
  static const Vocab v = build_o200k_harmony_vocab(TPS_O200K_JSON);
  return v;
}

const Tokenizer& tok() {
  static const Tokenizer t = [] {
    std::vector<std::string_view> tokens(vocab().tokens.begin(), vocab().tokens.end());
    std::vector<std::string_view> merges(vocab().merges.begin(), vocab().merges.end());
    return Tokenizer(tokens, vocab().token_types, merges);
  }();
  return t;
}

using Ids = std::vector<int32_t>;

// True when s is a sequence of whole UTF-8 characters.
bool complete_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(Vocab, MatchesTheReleasedFile) {
  EXPECT_EQ(vocab().tokens.size(), 201088u);
  EXPECT_EQ(vocab().merges.size(), 446189u);  // spec §4.2: the ggml-org file's count
  EXPECT_EQ(vocab().tokens[0], "!");
  EXPECT_EQ(vocab().tokens[220], "\xC4\xA0");  // " " as 'Ġ'
  EXPECT_EQ(vocab().merges[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ", as in the real file
  EXPECT_EQ(vocab().tokens[200006], "<|start|>");
  EXPECT_EQ(vocab().token_types[200006], 3);
  EXPECT_EQ(vocab().tokens[201087], "<|reserved_201087|>");
}

TEST(Tokenizer, KnownEncodings) {
  EXPECT_EQ(tok().encode("Hello, world!"), (Ids{13225, 11, 2375, 0}));
  EXPECT_EQ(tok().encode("12345678"), (Ids{7633, 19354, 4388}));
  EXPECT_EQ(tok().encode("I'm can't WE'LL"), (Ids{15390, 8535, 26919, 6, 7454}));
  EXPECT_EQ(tok().encode("  leading spaces\n\n\ttab"), (Ids{220, 8117, 18608, 279, 119380}));
  EXPECT_EQ(tok().encode("東京です"), (Ids{108713, 15121}));
  EXPECT_EQ(tok().encode("naïve café"), (Ids{1503, 9954, 737, 30469}));
  EXPECT_EQ(tok().encode("emoji 🤖!"), (Ids{75339, 93643, 244, 0}));
  EXPECT_EQ(tok().encode("foo/bar\n/baz"), (Ids{16660, 106617, 198, 7611, 1071}));
  EXPECT_EQ(tok().encode("The quick brown fox jumps over the lazy dog."),
            (Ids{976, 4853, 19705, 68347, 65613, 1072, 290, 29082, 6446, 13}));
  EXPECT_TRUE(tok().encode("").empty());
}

TEST(Tokenizer, HarmonyCompletionWithSpecials) {
  const std::string text =
      "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic. Provide "
      "answer.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
  Ids want{200005, 35644, 200008, 1844, 31064, 25,     392,    4827,   382,    220,   17,   659,
           220,    17,    16842,  12295, 81645, 13,     51441,  6052,   13,     200007, 200006,
           173781, 200005, 17196, 200008, 17,   659,    220,    17,     314,    220,    19,   13,
           200002};
  EXPECT_EQ(tok().encode(text, true), want);
  // Without parse_special the markers are plain text.
  Ids plain = tok().encode("<|end|>", false);
  EXPECT_GT(plain.size(), 1u);
  for (int32_t id : plain) EXPECT_FALSE(tok().is_control(id));
  EXPECT_EQ(tok().encode("a <|nope|> b", true), tok().encode("a <|nope|> b", false));
}

TEST(Tokenizer, ChatPromptMatchesTheHarmonyRenderer) {
  // spec §6.3: the 64 tokens of the default system message + "What is 2 + 2?".
  Ids want{200006, 17360, 200008, 3575,  553,   17554, 162016, 11,    261,    4410,  6439,
           2359,   22203, 656,    7788,  17527, 558,   87447,  100594, 25,    220,    1323,
           19,     12,    3218,   279,   30377, 289,   25,     14093,  279,   2,      13888,
           18403,  25,    8450,   11,    49159, 11,    1721,   13,     21030, 2804,   413,
           7360,   395,   1753,   3176,  13,    200007, 200006, 1428,   200008, 4827, 382,
           220,    17,    659,    220,   17,    30,     200007, 200006, 173781};
  Ids got = render_chat_prompt("What is 2 + 2?", ChatOptions{},
                               [](const std::string& s) { return tok().encode(s); });
  EXPECT_EQ(got, want);
}

TEST(Tokenizer, RoundTripsEveryByteString) {
  for (const std::string& s :
       {std::string("plain ascii text, with punctuation!"), std::string("tabs\tand\r\nCRLF  \n"),
        std::string("ünïcödé — “quotes” 中文 العربية हिन्दी"), std::string("\xff\xfe invalid \x80"),
        std::string("split \xe6\x9d"), std::string(1, '\0') + "nul", std::string(3000, 'a')}) {
    EXPECT_EQ(tok().decode(tok().encode(s)), s);
  }
}

TEST(Tokenizer, InvalidUtf8BecomesByteTokens) {
  Ids ids = tok().encode("a\xffz");
  EXPECT_EQ(tok().decode(ids), "a\xffz");
  bool has_ff = false;
  for (int32_t id : ids) has_ff |= tok().token_bytes(id) == "\xff";
  EXPECT_TRUE(has_ff);
}

TEST(Tokenizer, UnknownIdsAreErrors) {
  EXPECT_THROW(tok().token_bytes(201088), InputError);
  EXPECT_THROW(tok().token_bytes(-1), InputError);
  EXPECT_THROW(tok().decode(Ids{1, 999999}), InputError);
}

TEST(Utf8Stream, HoldsSplitCharactersBack) {
  // "🤖" is F0 9F A4 96, split by o200k into two tokens.
  Ids ids = tok().encode("🤖!");
  ASSERT_GE(ids.size(), 2u);
  Utf8Stream s;
  std::string out;
  for (int32_t id : ids) {
    std::string piece = s.push(tok().token_bytes(id));
    out += piece;
    EXPECT_TRUE(complete_utf8(out)) << "printed a broken character";
  }
  out += s.flush();
  EXPECT_EQ(out, "🤖!");
  Utf8Stream broken;
  EXPECT_EQ(broken.push("ab\xe6\x9d"), "ab");
  EXPECT_EQ(broken.flush(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tps

namespace tps {
namespace {

TEST(Harmony, StreamSeparatesChannels) {
  const std::string text =
      "<|channel|>analysis<|message|>User asks.<|end|><|start|>assistant<|channel|>final"
      "<|message|>2 + 2 = 4.<|return|>";
  std::string final_text, analysis;
  HarmonyStream stream;
  for (int32_t id : tok().encode(text, true)) {
    if (is_stop_token(id)) break;
    HarmonyStream::Step step = stream.push(id, tok().token_bytes(id));
    if (step.part != HarmonyStream::Part::content) continue;
    (step.channel == "final" ? final_text : analysis) += tok().token_bytes(id);
  }
  EXPECT_EQ(final_text, "2 + 2 = 4.");
  EXPECT_EQ(analysis, "User asks.");
  EXPECT_TRUE(is_stop_token(harmony::kCall));
  EXPECT_FALSE(is_stop_token(harmony::kEnd));  // <|end|> ends a message, not the turn
}

}  // namespace
}  // namespace tps
