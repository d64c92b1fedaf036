// The o200k_harmony vocabulary and its tokenizer, built once per test binary
// from tiktoken's ranks (default_o200k_json(), where scripts/install-deps puts them).
#pragma once

#include <string_view>
#include <vector>

#include "engine/text/o200k_vocab.h"
#include "engine/text/tokenizer.h"

namespace tps::testing {

inline const Vocab& test_vocab() {
  static const Vocab v = build_o200k_harmony_vocab(default_o200k_json());
  return v;
}

inline const Tokenizer& test_tokenizer() {
  static const Tokenizer t = [] {
    const Vocab& v = test_vocab();
    std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end());
    std::vector<std::string_view> merges(v.merges.begin(), v.merges.end());
    return Tokenizer(tokens, v.token_types, merges);
  }();
  return t;
}

}  // namespace tps::testing
