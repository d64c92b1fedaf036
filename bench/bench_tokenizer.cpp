// Tokenizer encode speed: MB/s of mixed text (the parity corpus, repeated)
// on one core. Prints what it measured and on what machine.
//   bench_tokenizer [MB]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/o200k_vocab.h"
#include "engine/tokenizer.h"

namespace {
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}
}  // namespace

int main(int argc, char** argv) {
  const double target_mb = argc > 1 ? std::atof(argv[1]) : 8.0;
  std::ifstream in(TPS_TEST_DATA "/tokenizer_corpus.json");
  std::string corpus;
  for (const std::string& d : nlohmann::json::parse(in).get<std::vector<std::string>>()) corpus += d + "\n";
  std::string text;
  while (text.size() < target_mb * 1e6) text += corpus;

  auto t0 = std::chrono::steady_clock::now();
  tps::Vocab v = tps::build_o200k_harmony_vocab(TPS_O200K_JSON);
  std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end());
  std::vector<std::string_view> merges(v.merges.begin(), v.merges.end());
  auto t1 = std::chrono::steady_clock::now();
  tps::Tokenizer tok(tokens, v.token_types, merges);
  auto t2 = std::chrono::steady_clock::now();
  size_t ids = tok.encode(text).size();
  auto t3 = std::chrono::steady_clock::now();
  auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::printf("machine: %s\n", cpu_model().c_str());
  std::printf("vocabulary from tiktoken ranks: %.2f s; tokenizer tables: %.2f s\n", s(t0, t1),
              s(t1, t2));
  std::printf("encoded %.1f MB of mixed text (%zu tokens) in %.2f s on one thread: %.1f MB/s\n",
              text.size() / 1e6, ids, s(t2, t3), text.size() / 1e6 / s(t2, t3));
  return 0;
}
