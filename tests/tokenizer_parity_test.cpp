// Parity with the reference tokenizer: text encoded by tps and by tiktoken
// (npm, under Node: tests/reference/tiktoken_encode.mjs) must give identical
// ids -- each document of the corpus, the whole corpus as one text, and
// seeded random mixtures of tricky characters. A missing Node or tiktoken
// fails the tests with the advice to run scripts/install-deps.
//
// The corpus is a JSON array of strings rather than a text file so that
// CR, CRLF, NUL and other control characters survive editors and git as they
// are. Invalid UTF-8 cannot go through tiktoken (it takes Unicode strings);
// tokenizer_test checks tps's own definition for it.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/text/o200k_vocab.h"
#include "engine/text/tokenizer.h"
#include "runtime/error.h"
#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using Ids = std::vector<int32_t>;
constexpr int kRandomTexts = 4000, kSeed = 20240805;

struct Reference {
  std::string error;  // why the reference could not be run, if it could not
  std::vector<std::string> documents;
  std::vector<Ids> document_ids;
  Ids whole_ids;
  std::vector<std::string> random_texts;
  std::vector<Ids> random_ids;
};

const Reference& reference() {
  static const Reference r = [] {
    Reference r;
    const std::string corpus = std::string(tps::test_paths::data) + "/tokenizer_corpus.json";
    testing::ToolResult run = testing::run_tool(cat(NODE_EXECUTABLE, " ", tps::test_paths::reference,
                                                    "/tiktoken_encode.mjs ", corpus, " ", kRandomTexts, " ", kSeed));
    if (run.exit_code != 0) {
      r.error = cat("the reference tokenizer did not run (exit code ", run.exit_code,
                    "; run scripts/install-deps to install Node and the npm package tiktoken):\n", run.err);
      return r;
    }
    std::ifstream in(corpus);
    r.documents = nlohmann::json::parse(in).get<std::vector<std::string>>();
    nlohmann::json j = nlohmann::json::parse(run.out);
    r.document_ids = j.at("documents").get<std::vector<Ids>>();
    r.whole_ids = j.at("whole").get<Ids>();
    for (const nlohmann::json& t : j.at("random")) {
      r.random_texts.push_back(t.at("text").get<std::string>());
      r.random_ids.push_back(t.at("ids").get<Ids>());
    }
    return r;
  }();
  return r;
}

const Tokenizer& tok() {
  static const Vocab v = build_o200k_harmony_vocab(default_o200k_json());
  static const Tokenizer t = [] {
    std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end());
    std::vector<std::string_view> merges(v.merges.begin(), v.merges.end());
    return Tokenizer(tokens, v.token_types, merges);
  }();
  return t;
}

// Bytes made readable in a message: control characters and bytes outside
// valid-looking UTF-8 sequences as \xNN.
std::string shown(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
    bool whole = i + n <= s.size();
    for (size_t k = 1; whole && k < n; ++k) whole = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (c >= 0x80 && n > 1 && whole) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    if (c < 0x20 || c >= 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

// Ids [from, to) with their text: 13225 'Hello', 11 ','.
std::string listed(const Ids& ids, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < std::min(to, ids.size()); ++i)
    out += cat(i > from ? ", " : "", ids[i], " '", shown(tok().token_bytes(ids[i])), "'");
  return out;
}

// Empty when equal; otherwise where the two first differ, with context.
std::string difference(const Ids& got, const Ids& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  if (i == got.size() && i == want.size()) return "";
  const size_t from = i < 3 ? 0 : i - 3;
  const std::string before = tok().decode(Ids(want.begin(), want.begin() + i));
  return cat("first difference at token ", i, " (byte ", before.size(), "; tps has ", got.size(), " tokens, tiktoken ",
             want.size(), ")\n  text before: '", shown(before.substr(before.size() > 60 ? before.size() - 60 : 0)),
             "'\n  tps:      ", listed(got, from, i + 5), "\n  tiktoken: ", listed(want, from, i + 5));
}

TEST(TokenizerParity, EachDocument) {
  const Reference& r = reference();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.document_ids.size(), r.documents.size());
  size_t compared = 0, bytes = 0;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    const std::string d = difference(tok().encode(r.documents[i]), r.document_ids[i]);
    if (!d.empty()) ADD_FAILURE() << "document " << i << " '" << shown(r.documents[i].substr(0, 80)) << "': " << d;
    compared += r.document_ids[i].size();
    bytes += r.documents[i].size();
  }
  std::printf("compared %zu token ids over %zu documents (%zu bytes)\n", compared, r.documents.size(), bytes);
}

TEST(TokenizerParity, WholeCorpusAsOneText) {
  const Reference& r = reference();
  ASSERT_TRUE(r.error.empty()) << r.error;
  std::string whole;
  for (size_t d = 0; d < r.documents.size(); ++d) whole += (d ? "\n" : "") + r.documents[d];
  const std::string d = difference(tok().encode(whole), r.whole_ids);
  if (!d.empty()) ADD_FAILURE() << "the whole corpus: " << d;
  std::printf("compared %zu token ids over %zu bytes\n", r.whole_ids.size(), whole.size());
}

TEST(TokenizerParity, RandomMixturesOfTrickyCharacters) {
  const Reference& r = reference();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.random_texts.size(), static_cast<size_t>(kRandomTexts));
  size_t compared = 0, failures = 0;
  for (size_t i = 0; i < r.random_texts.size() && failures < 10; ++i) {
    const std::string d = difference(tok().encode(r.random_texts[i]), r.random_ids[i]);
    if (!d.empty())
      ADD_FAILURE() << "random text " << i << " (seed " << kSeed << ") '" << shown(r.random_texts[i]) << "': " << d;
    failures += !d.empty();
    compared += r.random_ids[i].size();
  }
  std::printf("compared %zu token ids over %zu random texts\n", compared, r.random_texts.size());
}

}  // namespace
}  // namespace tps
