#include "engine/sched/drafter.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/text/harmony.h"

namespace tps {

// 21 bits a token: exact for a vocabulary below 2^21 (gpt-oss has 201,088).
// A larger id only aliases: a draft that is wrong, never a wrong token.
uint64_t Drafter::key_at(std::span<const int32_t> tokens, size_t end) {
  uint64_t k = 0;
  for (size_t i = end - kMatch; i < end; ++i) k = k << 21 | (static_cast<uint32_t>(tokens[i]) & 0x1fffff);
  return k;
}

int Drafter::matched(std::span<const int32_t> a, size_t a_end, std::span<const int32_t> b, size_t b_end) {
  int m = 0;
  while (m < kLongest && static_cast<size_t>(m) < std::min(a_end, b_end) && a[a_end - 1 - m] == b[b_end - 1 - m] &&
         a[a_end - 1 - m] != -1)
    ++m;
  return m;
}

Proposal Drafter::propose(std::span<const int32_t> tokens, int most, const DraftCorpus* corpus) {
  const int n = static_cast<int>(tokens.size());
  // Occurrences that end before the last token: the one ending at it is the
  // suffix itself.
  for (int end = std::max(indexed_, kMatch); end < n; ++end) after_[key_at(tokens, end)] = end;
  indexed_ = std::max(indexed_, n);
  Proposal p;
  if (n < kMatch || most <= 0) return p;
  const auto found = after_.find(key_at(tokens, n));
  if (found == after_.end()) {
    p = sources_.follow(tokens, most);
    return p.tokens.empty() && corpus ? corpus->follow(tokens, most) : p;
  }
  const int from = found->second, period = n - from;
  for (int i = 0; i < most; ++i) p.tokens.push_back(from + i < n ? tokens[from + i] : p.tokens[i - period]);
  p.matched = matched(tokens, static_cast<size_t>(from), tokens, static_cast<size_t>(n));
  return p;
}

double Drafter::chance(int matched) const {
  const int evidence = std::max(matched - kMatch, 0);  // the kMatch tokens that found the match say nothing
  return std::max(taken_, evidence / (evidence + 1.0));
}

void Drafter::verified(int drafted, int taken) {
  // Each drafted token checked is one observation: taken, or the first not.
  constexpr double kWeight = 0.2;
  for (int i = 0; i < taken; ++i) taken_ += kWeight * (1 - taken_);
  if (taken < drafted) taken_ -= kWeight * taken_;
}

int draft_length(double a, double token_cost, int most) {
  int best = 0;
  double best_rate = 1, tokens = 1, power = 1;
  for (int k = 1; k <= most; ++k) {
    power *= a, tokens += power;
    const double rate = tokens / (1 + k * token_cost);
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

void DraftCorpus::add(std::span<const int32_t> text) {
  if (text.empty() || static_cast<int64_t>(text.size()) + 1 > most_) return;
  if (size() + static_cast<int64_t>(text.size()) + 1 > most_) {  // the oldest texts go, half the corpus at least
    size_t cut = tokens_.size() / 2;
    while (cut < tokens_.size() && tokens_[cut - 1] != -1) ++cut;
    tokens_.erase(tokens_.begin(), tokens_.begin() + static_cast<std::ptrdiff_t>(cut));
    after_.clear();
    index_from(0);
    if (size() + static_cast<int64_t>(text.size()) + 1 > most_) tokens_.clear(), after_.clear();
  }
  const size_t at = tokens_.size();
  tokens_.insert(tokens_.end(), text.begin(), text.end());
  tokens_.push_back(-1);
  index_from(at);
}

// Occurrences of kMatch tokens of one text ending at or after `at`, with a
// token after them.
void DraftCorpus::index_from(size_t at) {
  for (size_t end = std::max<size_t>(at, Drafter::kMatch); end < tokens_.size(); ++end) {
    bool within = tokens_[end] != -1;
    for (size_t i = end - Drafter::kMatch; i < end; ++i) within = within && tokens_[i] != -1;
    if (within) after_[Drafter::key_at(tokens_, end)] = static_cast<int64_t>(end);
  }
}

Proposal DraftCorpus::follow(std::span<const int32_t> tokens, int most) const {
  Proposal p;
  if (tokens.size() < Drafter::kMatch) return p;
  const auto found = after_.find(Drafter::key_at(tokens, tokens.size()));
  if (found == after_.end()) return p;
  for (int64_t at = found->second; at < size() && tokens_[at] != -1 && static_cast<int>(p.tokens.size()) < most; ++at)
    p.tokens.push_back(tokens_[at]);
  p.matched = Drafter::matched(tokens_, static_cast<size_t>(found->second), tokens, tokens.size());
  return p;
}

void StepCostFit::add(double tokens, double seconds) {
  constexpr double kKeep = 0.99;  // a step's weight after each later one: the last few hundred count
  w = kKeep * w + 1, n = kKeep * n + tokens, t = kKeep * t + seconds;
  nn = kKeep * nn + tokens * tokens, nt = kKeep * nt + tokens * seconds;
}

bool StepCostFit::line(double& fixed, double& per_token) const {
  const double spread = w * nn - n * n;
  if (w < 2 || spread <= 1e-6 * w * w) return false;
  per_token = (w * nt - n * t) / spread;
  fixed = (t - per_token * n) / w;
  return per_token > 0 && fixed > 0;
}

std::vector<std::vector<int32_t>> escaped_messages(std::span<const int32_t> prompt, const Tokenizer& tok) {
  constexpr size_t kLong = 32;  // tokens: shorter messages are rarely written back
  std::vector<std::vector<int32_t>> out;
  for (size_t at = 0; at < prompt.size(); ++at) {
    if (prompt[at] != harmony::kMessage) continue;
    size_t end = at + 1;
    while (end < prompt.size() && prompt[end] != harmony::kEnd && prompt[end] != harmony::kCall &&
           prompt[end] != harmony::kReturn && prompt[end] != harmony::kStart)
      ++end;
    if (end - at - 1 >= kLong) {
      const std::string text = tok.decode(prompt.subspan(at + 1, end - at - 1));
      const std::string quoted = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (quoted.size() - 2 != text.size() || quoted.compare(1, text.size(), text) != 0)  // something was escaped
        out.push_back(tok.encode(std::string_view(quoted).substr(1, quoted.size() - 2)));
    }
    at = end;
  }
  return out;
}

}  // namespace tps
