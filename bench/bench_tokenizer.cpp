// Tokenizer encode speed on one thread: MB/s of text made by repeating the
// parity corpus (tests/data/tokenizer_corpus.json) -- once its ASCII
// documents (English, code, numbers), once all of it (every script, emoji,
// odd white space). Each text is encoded three times and the fastest run
// counts (the machine may be shared). Prints what it measured, the text
// sizes and the CPU.
//   bench_tokenizer [MB per text, default 8]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/text/o200k_vocab.h"
#include "engine/text/tokenizer.h"
#include "runtime/error.h"
#include "tests/test_paths.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

std::string repeated(const std::string& unit, double mb) {
  std::string text;
  while (text.size() < mb * 1e6) text += unit;
  return text;
}

void measure(const tps::Tokenizer& tok, const char* what, const std::string& text) {
  double best = 1e30;
  size_t ids = 0;
  for (int run = 0; run < 3; ++run) {
    auto t0 = Clock::now();
    ids = tok.encode(text).size();
    best = std::min(best, seconds_since(t0));
  }
  std::printf("%-36s %5.1f MB, %8zu tokens: %6.2f s, %5.1f MB/s, %4.2f M tokens/s\n", what, text.size() / 1e6, ids,
              best, text.size() / 1e6 / best, ids / 1e6 / best);
}

}  // namespace

int main(int argc, char** argv) {
  const double mb = argc > 1 ? std::atof(argv[1]) : 8.0;
  if (!(mb > 0)) {
    std::fprintf(stderr, "bench_tokenizer: MB must be a positive number, not '%s'\n", argv[1]);
    return 2;
  }
  std::ifstream in(std::string(tps::test_paths::data) + "/tokenizer_corpus.json");
  std::string all, ascii;
  size_t documents = 0, ascii_documents = 0;
  for (const std::string& d : nlohmann::json::parse(in).get<std::vector<std::string>>()) {
    all += d + "\n";
    ++documents;
    if (std::all_of(d.begin(), d.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
      ascii += d + "\n";
      ++ascii_documents;
    }
  }

  auto t0 = Clock::now();
  tps::Vocab v = tps::build_o200k_harmony_vocab(tps::default_o200k_json());
  const double vocab_s = seconds_since(t0);
  std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end());
  std::vector<std::string_view> merges(v.merges.begin(), v.merges.end());
  t0 = Clock::now();
  tps::Tokenizer tok(tokens, v.token_types, merges);
  const double tables_s = seconds_since(t0);

  std::printf("machine: %s\n", cpu_model().c_str());
  std::printf("vocabulary from tiktoken's ranks: %.2f s; tokenizer tables (%zu tokens, %zu merges): %.2f s\n", vocab_s,
              v.tokens.size(), v.merges.size(), tables_s);
  std::printf("encoding on one thread, fastest of 3 runs:\n");
  measure(tok, tps::cat("English and code (", ascii_documents, " documents)").c_str(), repeated(ascii, mb));
  measure(tok, tps::cat("all scripts (", documents, " documents)").c_str(), repeated(all, mb));
  return 0;
}
