// The o200k_harmony tokenizer the text fuzz targets share, built once from
// tiktoken's ranks (default_o200k_json(), where scripts/install-deps puts them),
// before the first input (fuzz_tokenizer.cpp): libFuzzer's -timeout would
// count the seconds building it takes on a busy machine against the first
// input, and report the empty input as a hang.
#pragma once

#include <string_view>
#include <vector>

#include "engine/text/o200k_vocab.h"
#include "engine/text/tokenizer.h"

namespace tps::fuzz {

inline const Tokenizer& tokenizer() {
  static const Tokenizer t = [] {
    const Vocab v = build_o200k_harmony_vocab(default_o200k_json());
    std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end());
    std::vector<std::string_view> merges(v.merges.begin(), v.merges.end());
    return Tokenizer(tokens, v.token_types, merges);
  }();
  return t;
}

}  // namespace tps::fuzz
