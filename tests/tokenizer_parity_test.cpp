// Parity with the reference tokenizer: every string of the corpus encoded by
// tps and by tiktoken (npm, under Node) must give identical ids.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/o200k_vocab.h"
#include "engine/tokenizer.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

TEST(TokenizerParity, SameIdsAsTiktoken) {
  const std::string corpus = std::string(TPS_TEST_DATA) + "/tokenizer_corpus.json";
  testing::ToolResult r = testing::run_tool(std::string(NODE_EXECUTABLE) + " " +
                                            TPS_REFERENCE_DIR "/tiktoken_encode.mjs " + corpus);
  ASSERT_EQ(r.exit_code, 0) << "the reference tokenizer did not run (run scripts/install-deps "
                               "to install Node and the npm package tiktoken):\n"
                            << r.err;
  nlohmann::json want = nlohmann::json::parse(r.out);

  std::ifstream in(corpus);
  std::vector<std::string> docs = nlohmann::json::parse(in).get<std::vector<std::string>>();
  ASSERT_EQ(want.size(), docs.size());

  Vocab v = build_o200k_harmony_vocab(TPS_O200K_JSON);
  std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end());
  std::vector<std::string_view> merges(v.merges.begin(), v.merges.end());
  Tokenizer tok(tokens, v.token_types, merges);

  size_t compared = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<int32_t> got = tok.encode(docs[d]);
    std::vector<int32_t> ref = want[d].get<std::vector<int32_t>>();
    size_t i = 0;
    while (i < got.size() && i < ref.size() && got[i] == ref[i]) ++i;
    EXPECT_TRUE(i == got.size() && i == ref.size())
        << "document " << d << " differs at token " << i << " (tps " << got.size()
        << " tokens, tiktoken " << ref.size() << "); text: " << docs[d].substr(0, 120);
    compared += ref.size();
  }
  std::printf("compared %zu token ids over %zu documents\n", compared, docs.size());
}

}  // namespace
}  // namespace tps
