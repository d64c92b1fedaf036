// Constrained decoding's cost, as MaskBench measures it: over a corpus of
// JSON Schemas -- the realistic API schemas in bench/grammar/ and the
// schemas of JSON-Schema-Test-Suite (draft 7, Debian's
// json-schema-test-suite) -- the schemas honoured and refused (with why),
// each honoured schema's compile time (schema to grammar, ready to mask),
// and the time of every mask along random walks (each step a token drawn
// uniformly from the mask, as a random-weight model at temperature 1 does),
// one thread, the o200k_harmony vocabulary (201,088 tokens). Reports p50,
// p99 and the largest. Compiling builds the tables of the grammar's loops
// (kept for every later grammar: the first schema with a string pays for
// the string automaton's). Not a test: it prints what it measured.
//   build/bin/bench_grammar [WALKS STEPS [DIR]]   (default 4 walks of up to 200
//                                                 steps; DIR: only its schemas)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "engine/text/o200k_vocab.h"
#include "runtime/error.h"
#include "tests/test_paths.h"

namespace {

using namespace tps;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Corpus {
  std::string name;
  std::vector<std::pair<std::string, json>> schemas;  // (name, schema)
};

}  // namespace

int main(int argc, char** argv) {
  const int walks = argc > 1 ? std::atoi(argv[1]) : 4, steps = argc > 2 ? std::atoi(argv[2]) : 200;
  if (walks < 1 || steps < 1) {
    std::fprintf(stderr, "bench_grammar: WALKS and STEPS must be positive integers\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines as they come, when piped
  try {
    const Vocab v = build_o200k_harmony_vocab(default_o200k_json());
    std::vector<std::string_view> tokens(v.tokens.begin(), v.tokens.end()), merges(v.merges.begin(), v.merges.end());
    const Tokenizer tok(tokens, v.token_types, merges);
    auto t0 = Clock::now();
    auto index = std::make_shared<const TokenIndex>(tok);
    std::printf("bench_grammar: o200k_harmony, %d tokens; vocabulary index built in %.1f ms\n", tok.vocab_size(),
                micros_since(t0) / 1000);

    std::vector<Corpus> corpora(argc > 3 ? 1 : 2);
    const std::string dir = argc > 3 ? argv[3] : std::string(test_paths::reference) + "/../../bench/grammar";
    corpora[0].name = "API schemas (" + dir + ")";
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(f.path());
      corpora[0].schemas.emplace_back(f.path().stem().string(), json::parse(in));
    }
    std::sort(corpora[0].schemas.begin(), corpora[0].schemas.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    if (corpora.size() > 1) corpora[1].name = "JSON-Schema-Test-Suite draft 7";
    for (const auto& f : std::filesystem::directory_iterator("/usr/share/json-schema-test-suite/tests/draft7")) {
      if (corpora.size() == 1) break;
      if (f.path().extension() != ".json") continue;
      std::ifstream in(f.path());
      for (const json& group : json::parse(in))
        corpora[1].schemas.emplace_back(f.path().stem().string() + ": " + group["description"].get<std::string>(),
                                        group["schema"]);
    }

    const int32_t end = tok.special_id("<|return|>").value();
    std::mt19937 rng(1);
    for (const Corpus& c : corpora) {
      std::vector<double> compile, masks;
      std::map<std::string, int> refused;
      int honoured = 0, completed = 0, walked = 0;
      for (const auto& [name, schema] : c.schemas) {
        std::shared_ptr<const CompiledGrammar> g;
        t0 = Clock::now();
        try {
          Grammar grammar;
          const int start = add_json_schema(grammar, schema);
          g = compile_grammar(std::move(grammar), start, index, {end});
        } catch (const InputError& e) {
          std::string why = e.what();
          const size_t colon = why.find(": ");
          ++refused[colon == std::string::npos ? why : why.substr(colon + 2)];
          continue;
        }
        compile.push_back(micros_since(t0));
        ++honoured;
        const size_t first_mask = masks.size();
        for (int w = 0; w < walks; ++w) {
          Matcher m(g);
          ++walked;
          for (int s = 0; s < steps && !m.complete(); ++s) {
            t0 = Clock::now();
            const TokenSet& mask = m.allowed();
            masks.push_back(micros_since(t0));
            std::vector<int32_t> allowed;
            for (size_t word = 0; word < mask.words().size(); ++word)
              for (uint64_t bits = mask.words()[word]; bits; bits &= bits - 1)
                allowed.push_back(static_cast<int32_t>(word * 64 + __builtin_ctzll(bits)));
            if (allowed.empty()) throw Error(cat(name, ": an empty mask before the grammar was complete"));
            m.accept(allowed[rng() % allowed.size()]);
          }
          completed += m.complete();
        }
        const std::vector<double> mine(masks.begin() + static_cast<std::ptrdiff_t>(first_mask), masks.end());
        if (percentile(mine, 0.99) > 1000)
          std::printf("  slow: %s: p50 %.1f us, p99 %.1f us\n", name.c_str(), percentile(mine, 0.5),
                      percentile(mine, 0.99));
      }
      std::printf("\n%s: %zu schemas, %d honoured, %zu refused\n", c.name.c_str(), c.schemas.size(), honoured,
                  c.schemas.size() - honoured);
      for (const auto& [why, n] : refused) std::printf("  refused %3d: %s\n", n, why.substr(0, 100).c_str());
      std::printf("  compile: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", percentile(compile, 0.5) / 1000,
                  percentile(compile, 0.99) / 1000, percentile(compile, 1.0) / 1000);
      std::printf("  masks: %zu over %d walks (%d reached the end): p50 %.1f us, p99 %.1f us, max %.1f us\n",
                  masks.size(), walked, completed, percentile(masks, 0.5), percentile(masks, 0.99),
                  percentile(masks, 1.0));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grammar: %s\n", e.what());
    return 1;
  }
  return 0;
}
