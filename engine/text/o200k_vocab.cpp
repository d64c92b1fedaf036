#include "engine/text/o200k_vocab.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "engine/text/byte_level.h"
#include "runtime/base64.h"
#include "runtime/error.h"
#include "runtime/mapped_file.h"

namespace tps {
namespace {

constexpr uint32_t kRanks = 199998, kVocab = 201088;

}  // namespace

std::string harmony_special_name(uint32_t id) {
  switch (id) {
    case 199998: return "<|startoftext|>";
    case 199999: return "<|endoftext|>";
    case 200002: return "<|return|>";
    case 200003: return "<|constrain|>";
    case 200005: return "<|channel|>";
    case 200006: return "<|start|>";
    case 200007: return "<|end|>";
    case 200008: return "<|message|>";
    case 200012: return "<|call|>";
    case 200018: return "<|endofprompt|>";  // inherited from o200k_base
    default: return "<|reserved_" + std::to_string(id) + "|>";
  }
}

Vocab build_o200k_harmony_vocab(const std::string& path) {
  // A regular file only, as every input (a FIFO's open waited for a writer).
  std::string json_text;
  try {
    json_text = read_text_file(path);
  } catch (const InputError&) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) throw;
    throw InputError(cat(path,
                         ": cannot read the o200k ranks (run scripts/install-deps, which "
                         "installs the npm package tiktoken)"));
  }
  std::string ranks_text;
  try {
    ranks_text = nlohmann::json::parse(json_text).at("bpe_ranks").get<std::string>();
  } catch (const std::exception& e) {
    throw InputError(cat(path, ": not tiktoken's o200k_base.json (", e.what(), ")"));
  }

  // "bpe_ranks": lines of "! FIRST_RANK base64 base64 ...", consecutive ranks.
  std::vector<std::string> bytes_of_rank(kRanks);
  std::vector<bool> seen(kRanks, false);
  std::istringstream lines(ranks_text);
  std::string line, item, decoded;
  while (std::getline(lines, line)) {
    std::istringstream items(line);
    std::string marker;
    long long rank = -1;
    if (!(items >> marker >> rank) || rank < 0)
      throw InputError(cat(path, ": bpe_ranks line does not start with '! RANK'"));
    for (; items >> item; ++rank) {
      if (rank >= kRanks || !base64_decode(item, decoded) || decoded.empty())
        throw InputError(cat(path, ": bad bpe_ranks entry '", item, "' for rank ", rank));
      bytes_of_rank[rank] = decoded;
      seen[rank] = true;
    }
  }
  if (std::count(seen.begin(), seen.end(), true) != kRanks)
    throw InputError(cat(path, ": expected ranks 0..", kRanks - 1, " (o200k_base)"));

  Vocab v;
  v.tokens.reserve(kVocab);
  v.token_types.reserve(kVocab);
  for (uint32_t r = 0; r < kRanks; ++r) {
    v.tokens.push_back(bytes_to_vocab_text(bytes_of_rank[r]));
    v.token_types.push_back(1);
  }
  for (uint32_t id = kRanks; id < kVocab; ++id) {
    v.tokens.push_back(harmony_special_name(id));
    v.token_types.push_back(3);
  }

  // Merges: every split of every token into two tokens.
  std::unordered_map<std::string_view, uint32_t> rank_of;
  rank_of.reserve(kRanks * 2);
  for (uint32_t r = 0; r < kRanks; ++r) rank_of.emplace(bytes_of_rank[r], r);
  struct Split {
    uint32_t left, right;
  };
  std::vector<Split> splits;
  for (uint32_t r = 0; r < kRanks; ++r) {
    std::string_view t = bytes_of_rank[r];
    splits.clear();
    for (size_t i = 1; i < t.size(); ++i) {
      auto l = rank_of.find(t.substr(0, i)), rr = rank_of.find(t.substr(i));
      if (l != rank_of.end() && rr != rank_of.end()) splits.push_back({l->second, rr->second});
    }
    std::sort(splits.begin(), splits.end(),
              [](const Split& a, const Split& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
    for (const Split& s : splits) v.merges.push_back(v.tokens[s.left] + " " + v.tokens[s.right]);
  }
  return v;
}

}  // namespace tps
