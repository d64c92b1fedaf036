// The o200k_harmony tokenizer: the vocabulary built from tiktoken's ranks,
// known encodings (spec §7.3), tiktoken's merge order, special tokens,
// invalid UTF-8, decoding, and streaming of characters split across tokens.
// Needs tiktoken's o200k_base.json (scripts/install-deps installs it); a
// missing file fails the tests with that advice.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/text/byte_level.h"
#include "engine/text/o200k_vocab.h"
#include "engine/text/tokenizer.h"
#include "runtime/error.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using Ids = std::vector<int32_t>;

const Vocab& vocab() { return testing::test_vocab(); }

Tokenizer make_tokenizer(const std::vector<std::string>& tokens, const std::vector<int32_t>& types,
                         const std::vector<std::string>& merges) {
  std::vector<std::string_view> t(tokens.begin(), tokens.end()), m(merges.begin(), merges.end());
  return Tokenizer(t, types, m);
}

const Tokenizer& tok() { return testing::test_tokenizer(); }

// tiktoken's BPE, written as plainly as possible from the ranks alone: a
// whole piece that is a token is that token; otherwise merge the adjacent
// pair whose concatenation has the lowest rank, leftmost first, until none is
// a token. The tokenizer under test takes its order from the merge list.
Ids tiktoken_bpe(const std::string& piece) {
  static const std::unordered_map<std::string, int32_t> rank = [] {
    std::unordered_map<std::string, int32_t> r;
    for (int32_t id = 0; id < 199998; ++id) r.emplace(*vocab_text_to_bytes(vocab().tokens[id]), id);
    return r;
  }();
  if (auto it = rank.find(piece); it != rank.end()) return {it->second};
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  for (;;) {
    size_t best = parts.size();
    int32_t best_rank = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank.find(parts[i] + parts[i + 1]);
      if (it != rank.end() && (best == parts.size() || it->second < best_rank)) best = i, best_rank = it->second;
    }
    if (best == parts.size()) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + best + 1);
  }
  Ids ids;
  for (const std::string& p : parts) ids.push_back(rank.at(p));
  return ids;
}

Ids join(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// True when s is a sequence of whole, valid UTF-8 characters.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    size_t n;
    if (c < 0x80)
      cp = c, n = 1;
    else if ((c & 0xE0) == 0xC0)
      cp = c & 0x1F, n = 2;
    else if ((c & 0xF0) == 0xE0)
      cp = c & 0x0F, n = 3;
    else if ((c & 0xF8) == 0xF0)
      cp = c & 0x07, n = 4;
    else
      return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// --- the vocabulary ---

TEST(Vocab, MatchesTheReleasedFile) {
  const Vocab& v = vocab();
  ASSERT_EQ(v.tokens.size(), 201088u);
  ASSERT_EQ(v.token_types.size(), 201088u);
  EXPECT_EQ(v.merges.size(), 446189u);  // spec §5.3: the released file's count
  EXPECT_EQ(v.tokens[0], "!");
  EXPECT_EQ(v.tokens[220], "\xC4\xA0");         // " " as 'Ġ'
  EXPECT_EQ(v.tokens[198], "\xC4\x8A");         // "\n" as 'Ċ'
  EXPECT_EQ(v.merges[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ", as in the released file
  EXPECT_EQ(v.tokens[199998], "<|startoftext|>");
  EXPECT_EQ(v.tokens[200000], "<|reserved_200000|>");
  EXPECT_EQ(v.tokens[200006], "<|start|>");
  EXPECT_EQ(v.tokens[200012], "<|call|>");
  EXPECT_EQ(v.tokens[200018], "<|endofprompt|>");  // o200k_base's, kept by the HF tokenizer
  EXPECT_EQ(v.tokens[201087], "<|reserved_201087|>");
  for (uint32_t id = 0; id < 201088; ++id) {
    ASSERT_EQ(v.token_types[id], id < 199998 ? 1 : 3) << "token " << id;
    if (id < 199998) {
      ASSERT_TRUE(vocab_text_to_bytes(v.tokens[id])) << "token " << id;
    }
  }
  EXPECT_EQ(v.bos, 199998u);
  EXPECT_EQ(v.eos, 200002u);
  EXPECT_EQ(v.pad, 199999u);
}

TEST(Vocab, MergesJoinTokensInRankOrder) {
  const Vocab& v = vocab();
  std::unordered_map<std::string_view, int32_t> id;
  for (int32_t i = 0; i < 199998; ++i) id.emplace(v.tokens[i], i);
  std::unordered_set<int32_t> made;
  int32_t last = -1;
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    const size_t space = m.find(' ');
    ASSERT_NE(space, std::string::npos) << "merge " << r;
    ASSERT_EQ(m.find(' ', space + 1), std::string::npos) << "merge " << r;
    const std::string left = m.substr(0, space), right = m.substr(space + 1);
    ASSERT_TRUE(id.count(left) && id.count(right)) << "merge " << r << ": " << m;
    auto result = id.find(left + right);
    ASSERT_NE(result, id.end()) << "merge " << r << ": " << m;
    ASSERT_GE(result->second, last) << "merge " << r << " is out of rank order";
    last = result->second;
    made.insert(result->second);
  }
  // Every multi-byte token can be made (all but the 256 single bytes).
  EXPECT_EQ(made.size(), 199998u - 256u);
}

TEST(Vocab, MissingRanksFileSaysHowToGetIt) {
  try {
    build_o200k_harmony_vocab("/nonexistent/o200k_base.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/o200k_base.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("scripts/install-deps"), std::string::npos) << e.what();
  }
}

// --- encoding ---

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
  // U+180E is a format character to tiktoken (so it joins the "'"), white
  // space to PCRE2's \s (then "'ll" would be one token, 6090). Ids from
  // tiktoken 1.0.22.
  EXPECT_EQ(tok().encode("x\u180e'll"), (Ids{87, 157, 254, 236, 6, 680}));
  EXPECT_TRUE(tok().encode("").empty());
  EXPECT_TRUE(tok().encode("", true).empty());
}

TEST(Tokenizer, HarmonyCompletionWithSpecials) {
  const std::string text =
      "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic. Provide "
      "answer.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
  Ids want{200005, 35644, 200008, 1844,  31064, 25,  392,   4827, 382, 220,    17,     659,
           220,    17,    16842,  12295, 81645, 13,  51441, 6052, 13,  200007, 200006, 173781,
           200005, 17196, 200008, 17,    659,   220, 17,    314,  220, 19,     13,     200002};
  EXPECT_EQ(tok().encode(text, true), want);
  EXPECT_EQ(tok().decode(want), text);
}

TEST(Tokenizer, SpecialsAreTextUnlessAsked) {
  const std::string text = "say <|end|> then <|start|>";
  Ids plain = tok().encode(text, false);
  for (int32_t id : plain) EXPECT_FALSE(tok().is_control(id)) << "id " << id;
  EXPECT_EQ(tok().decode(plain), text);
  Ids parsed = tok().encode(text, true);
  EXPECT_EQ(parsed[parsed.size() - 1], 200006);
  // Not a special token, and specials cut apart by other text, stay text.
  EXPECT_EQ(tok().encode("a <|nope|> b <|en d|>", true), tok().encode("a <|nope|> b <|en d|>"));
  EXPECT_EQ(tok().encode("<|end", true), tok().encode("<|end"));
}

TEST(Tokenizer, EverySpecialTokenParsesToItsId) {
  for (int32_t id = 199998; id < 201088; ++id) {
    const std::string& text = tok().token_bytes(id);
    ASSERT_TRUE(tok().is_control(id)) << text;
    EXPECT_EQ(tok().encode(text, true), Ids{id}) << text;
    EXPECT_EQ(tok().encode("x" + text + "y", true), join({Ids{87}, Ids{id}, Ids{88}})) << text;
    EXPECT_EQ(tok().special_id(text), id);
  }
  EXPECT_EQ(tok().special_id("<|nope|>"), std::nullopt);
}

// A vocabulary of the 256 bytes plus specials of any shape, one a prefix of
// another, and one user-defined token.
TEST(Tokenizer, SpecialsMatchLiterallyLongestFirst) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(bytes_to_vocab_text(std::string(1, char(b))));
  std::vector<int32_t> types(256, 1);
  for (const char* s : {"<a>", "<a><b>", "[x]"}) tokens.push_back(s), types.push_back(3);
  tokens.push_back("@@"), types.push_back(4);
  Tokenizer t = make_tokenizer(tokens, types, {});
  const int32_t a = 256, ab = 257, x = 258, at = 259;
  EXPECT_EQ(t.encode("1<a><b>2<a>3[x]@@<a><a><b", true), (Ids{'1', ab, '2', a, '3', x, at, a, a, '<', 'b'}));
  EXPECT_EQ(t.encode("<a>", false), (Ids{'<', 'a', '>'}));
  EXPECT_EQ(t.decode(Ids{ab, '!', at}), "<a><b>!@@");
}

// Pieces the split pattern keeps whole (a word with its leading space, an
// all-caps word, a CJK run, a run of punctuation) encoded by the tokenizer
// and by tiktoken's rule on the ranks.
TEST(Tokenizer, MergesFollowTiktokensRanks) {
  std::mt19937 rng(7);
  auto pick = [&](std::string_view set, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += set[rng() % set.size()];
    return s;
  };
  const std::vector<std::string> cjk = {"東", "京", "大", "学", "日", "本", "語", "の", "で", "す",
                                        "中", "文", "人", "工", "智", "能", "世", "界", "한", "국"};
  size_t compared = 0;
  for (int i = 0; i < 3000; ++i) {
    const size_t n = 1 + rng() % 24;
    std::string piece;
    switch (i % 5) {
      case 0: piece = " " + pick("abcdefghijklmnopqrstuvwxyz", n); break;
      case 1: piece = pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1) + pick("etaoinshrdlu", n); break;
      case 2: piece = " " + pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ", n); break;
      case 3:
        for (size_t k = 0; k < n; ++k) piece += cjk[rng() % cjk.size()];
        break;
      default: piece = " " + pick("!#$%&()*+,-.:;<=>?@[]^_{|}~", n); break;
    }
    Ids want = tiktoken_bpe(piece);
    ASSERT_EQ(tok().encode(piece), want) << "piece '" << piece << "'";
    compared += want.size();
  }
  EXPECT_GT(compared, 3000u);
}

// A token with two merges ranks at the first of them (tiktoken ranks tokens,
// not pairs): here "ab c" comes after "c d" in the list, yet makes "abc",
// whose first merge "a bc" comes before "c d".
TEST(Tokenizer, ATokensRankIsItsFirstMerge) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(bytes_to_vocab_text(std::string(1, char(b))));
  for (const char* s : {"ab", "bc", "abc", "cd"}) tokens.push_back(s);
  Tokenizer t = make_tokenizer(tokens, {}, {"a b", "b c", "a bc", "c d", "ab c"});
  EXPECT_EQ(t.encode("abcd"), (Ids{258, 'd'}));  // per-pair order would give "ab", "cd"
}

// Encoding's tables are made at the first encode (tokenizer.h): threads
// that encode first together all wait for one making of them.
TEST(Tokenizer, ThreadsThatEncodeFirstTogetherGetTheSameIds) {
  const Vocab& v = testing::test_vocab();
  const std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end()),
      merges(v.merges.begin(), v.merges.end());
  const Tokenizer t(tokens, v.token_types, merges);
  const std::string text = "The tokenizer's tables are built once, whoever asks first.";
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (Ids& ids : got) threads.emplace_back([&] { ids = t.encode(text); });
  for (std::thread& th : threads) th.join();
  for (const Ids& ids : got) EXPECT_EQ(ids, tok().encode(text));
}

TEST(Tokenizer, LongInputs) {
  for (const std::string& s : {std::string(100000, ' '), std::string(100000, 'a'), std::string(50000, '\n') + "x",
                               std::string(30000, '7'), "x" + std::string(40000, '!') + "\r\n"}) {
    Ids ids = tok().encode(s);
    EXPECT_EQ(tok().decode(ids), s);
    EXPECT_LT(ids.size(), s.size() / 2) << "'" << s.substr(0, 1) << "' x " << s.size();
  }
  const std::string word(3000, 'a');
  EXPECT_EQ(tok().encode(word), tiktoken_bpe(word));
}

// --- invalid UTF-8, decoding ---

TEST(Tokenizer, RoundTripsEveryByteString) {
  for (const std::string& s :
       {std::string("plain ascii text, with punctuation!"), std::string("tabs\tand\r\nCRLF  \n"),
        std::string("ünïcödé — “quotes” 中文 العربية हिन्दी"), std::string("\xff\xfe invalid \x80"),
        std::string("split \xe6\x9d"), std::string(1, '\0') + "nul", std::string(3000, 'a')}) {
    EXPECT_EQ(tok().decode(tok().encode(s)), s);
    EXPECT_EQ(tok().decode(tok().encode(s, true)), s);
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 48, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 3 ? rng() % 256 : 0x80 + rng() % 64);
    ASSERT_EQ(tok().decode(tok().encode(s)), s) << "random byte string " << i;
  }
}

// The documented definition (tokenizer.h): a run of invalid bytes is a piece
// of its own, and the valid text on either side is encoded as if it ended or
// started there.
TEST(Tokenizer, InvalidUtf8IsAPieceOfItsOwn) {
  const std::vector<std::string> before = {"", "hello", "hello ", "x  ", "it", "12", "é", "\n"};
  const std::vector<std::string> invalid = {"\xff",
                                            "\x80",
                                            "\xfe\xff\x80",
                                            "\xc3",               // truncated é
                                            "\xe6\x9d",           // truncated 杀
                                            "\xf0\x9f\xa4",       // truncated 🤖
                                            "\xc0\x80",           // overlong NUL
                                            "\xed\xa0\x80",       // a surrogate
                                            "\xf4\x90\x80\x80"};  // past U+10FFFF
  const std::vector<std::string> after = {"", "world", " world", "  y", "'s", "345", "\u0301a", "\r\n"};
  for (const std::string& a : before)
    for (const std::string& bad : invalid)
      for (const std::string& b : after)
        ASSERT_EQ(tok().encode(a + bad + b), join({tok().encode(a), tiktoken_bpe(bad), tok().encode(b)}))
            << "'" << a << "' + invalid + '" << b << "'";
}

TEST(Tokenizer, UnknownIdsNameTheIdAndTheVocabularySize) {
  for (int32_t id : {201088, -1, 1 << 30}) {
    try {
      tok().token_bytes(id);
      FAIL() << "no error for " << id;
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("token id " + std::to_string(id)), std::string::npos) << m;
      EXPECT_NE(m.find("201088 tokens"), std::string::npos) << m;
    }
  }
  EXPECT_THROW(tok().decode(Ids{1, 999999}), InputError);
  EXPECT_FALSE(tok().is_control(-1));
  EXPECT_FALSE(tok().is_control(201088));
}

TEST(Tokenizer, RejectsWhatIsNotByteLevelBpe) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(bytes_to_vocab_text(std::string(1, char(b))));
  auto error = [](auto make) {
    try {
      make();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<std::string> spm = bytes;
  spm.push_back("\xE2\x96\x81the");  // SentencePiece's "▁the"
  EXPECT_NE(error([&] { make_tokenizer(spm, {}, {}); }).find("tokenizer.ggml.tokens[256]"), std::string::npos);
  std::vector<std::string> missing(bytes.begin() + 1, bytes.end());
  EXPECT_NE(error([&] { make_tokenizer(missing, {}, {}); }).find("byte 0"), std::string::npos);
  EXPECT_NE(error([&] { make_tokenizer(bytes, {1, 1}, {}); }).find("2 token types for 256"), std::string::npos);
  EXPECT_NE(error([&] { make_tokenizer(bytes, {}, {"ab"}); }).find("tokenizer.ggml.merges[0]"), std::string::npos);
}

// --- streaming text ---

TEST(Utf8Stream, HoldsSplitCharactersBack) {
  // "🤖" is F0 9F A4 96, split by o200k into two tokens.
  Ids ids = tok().encode("🤖!");
  ASSERT_EQ(ids.size(), 3u);
  Utf8Stream s;
  EXPECT_EQ(s.push(tok().token_bytes(ids[0])), "");
  EXPECT_EQ(s.push(tok().token_bytes(ids[1])), "🤖");
  EXPECT_EQ(s.push(tok().token_bytes(ids[2])), "!");
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Stream, ShowsEveryTextExactlyWhateverTheSplit) {
  const std::string text =
      "naïve 東京 हिन्दी 👨‍👩‍👧 🇺🇸 العربية Z͓͑͒algo ∑∞";
  for (bool by_token : {true, false}) {
    Utf8Stream s;
    std::string out;
    if (by_token) {
      for (int32_t id : tok().encode(text)) {
        out += s.push(tok().token_bytes(id));
        ASSERT_TRUE(valid_utf8(out)) << "printed a broken character";
      }
    } else {
      for (char c : text) {
        out += s.push(std::string_view(&c, 1));
        ASSERT_TRUE(valid_utf8(out)) << "printed a broken character";
      }
    }
    out += s.flush();
    EXPECT_EQ(out, text);
  }
}

TEST(Utf8Stream, InvalidBytesBecomeReplacementCharacters) {
  const std::string R = "\xEF\xBF\xBD";
  auto show = [](std::initializer_list<std::string_view> pieces) {
    Utf8Stream s;
    std::string out;
    for (std::string_view p : pieces) out += s.push(p);
    return out + s.flush();
  };
  EXPECT_EQ(show({"a\xff", "b"}), "a" + R + "b");
  EXPECT_EQ(show({"\xe6\x9d", "x"}), R + "x");                    // a cut-off character, then ASCII
  EXPECT_EQ(show({"ab\xe6\x9d"}), "ab" + R);                      // cut off at the end
  EXPECT_EQ(show({"\xed\xa0\x80"}), R + R + R);                   // a surrogate: three bad bytes
  EXPECT_EQ(show({"\xc0\x80"}), R + R);                           // overlong
  EXPECT_EQ(show({"\xf4\x90\x80\x80"}), R + R + R + R);           // past U+10FFFF
  EXPECT_EQ(show({"\xf0\x9f", "\xa4", "\x96\x80"}), "🤖" + R);  // a stray continuation byte
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    Utf8Stream s;
    std::string out;
    for (int k = rng() % 8; k > 0; --k) {
      std::string piece(rng() % 5, '\0');
      for (char& c : piece) c = static_cast<char>(0x80 + rng() % 128);
      out += s.push(piece);
      ASSERT_TRUE(valid_utf8(out));
    }
    out += s.flush();
    ASSERT_TRUE(valid_utf8(out));
  }
}

}  // namespace
}  // namespace tps
