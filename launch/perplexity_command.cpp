#include "launch/perplexity_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "engine/eval/logits_file.h"
#include "engine/eval/token_scores.h"
#include "launch/cli.h"
#include "launch/json_output.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mapped_file.h"

namespace tps {

namespace {

// Scored positions per forward step: their logits rows over the whole
// vocabulary are what the step holds (64 x 201,088 floats, 51 MB).
constexpr int kScoredPerStep = 64;
// The shortest window: what a saved base may have (engine/eval/logits_file).
constexpr int kMinWindow = 4;

// The windows to score, from the text or from the base file.
struct Windows {
  std::vector<int32_t> tokens;  // chunks x size
  int size = 0, chunks = 0;
  int n_vocab = 0;
  bool add_bos = false;
  int32_t bos = 0;
};

Windows windows(const PerplexityOptions& p, const std::optional<LogitsFile>& base, const GgufFile& file) {
  const std::string& model = file.path();
  const ModelConfig config = read_model_config(file);
  Windows w;
  w.n_vocab = static_cast<int>(config.n_vocab);
  // gpt-oss files say no BOS (or nothing, which llama.cpp reads as no for
  // their tokenizer): windows then start mid-text, as llama-perplexity's.
  w.add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(false);
  w.bos = static_cast<int32_t>(file.find_u32("tokenizer.ggml.bos_token_id").value_or(0));
  if (base) {
    if (static_cast<uint32_t>(base->n_vocab()) != config.n_vocab)
      throw InputError(cat(base->path(), ": log-probabilities over ", base->n_vocab(), " tokens, but ", model,
                           " has a vocabulary of ", config.n_vocab, " (a base from another model family)"));
    if (p.window_given && p.window != base->n_ctx())
      throw InputError(cat("--ctx ", p.window, ": ", base->path(), " was scored in windows of ", base->n_ctx(),
                           " tokens; leave --ctx out"));
    w.size = base->n_ctx();
    w.tokens.assign(base->tokens().begin(), base->tokens().end());
    w.chunks = base->n_chunk();
    return w;
  }
  // Half a window is context and the rest scored, the last position
  // predicting nothing: under 3 tokens nothing is scored (--ctx 2 printed
  // PPL = -nan), and a base file of fewer than 4 (LogitsFile) is refused.
  if (p.window < kMinWindow)
    throw InputError(cat("--ctx ", p.window, ": a window of at least ", kMinWindow,
                         " tokens is needed (its first half is context, the rest is scored)"));
  std::string text = read_text_file(p.text_file);
  if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama.cpp's -f
  // Control-token text in the data is text (llama-perplexity: no parsing).
  w.tokens = Tokenizer::from_gguf(file).encode(text, false);
  if (w.add_bos) w.tokens.insert(w.tokens.begin(), w.bos);
  w.size = p.window;
  if (static_cast<int64_t>(w.tokens.size()) < 2 * static_cast<int64_t>(w.size))
    throw InputError(cat(p.text_file, ": ", w.tokens.size(), " tokens, but windows of ", w.size,
                         " (--ctx) need at least ", 2 * static_cast<int64_t>(w.size),
                         " (two windows, as llama-perplexity asks)"));
  w.chunks = static_cast<int>(w.tokens.size() / w.size);
  if (p.chunks > 0) w.chunks = std::min(w.chunks, p.chunks);
  w.tokens.resize(static_cast<size_t>(w.chunks) * w.size);
  return w;
}

// The logits of n positions over the whole vocabulary ([n][vocab]) on
// every rank: the ranks' vocabulary rows put together, or a pipeline's last
// rank's sent to all.
std::vector<float> whole_rows(RankRun& r, const std::vector<float>& mine, int n) {
  const int64_t vocab = r.model.config.n_vocab;
  const Shard& s = r.shard();
  if (s.ranks == 1) return mine;
  std::vector<float> all(static_cast<size_t>(n) * vocab);
  if (r.pipeline()) {
    if (s.rank == r.last_rank()) std::copy(mine.begin(), mine.end(), all.begin());
    r.exchange.broadcast(all.data(), all.size() * sizeof(float), r.last_rank());
    return all;
  }
  const int64_t range[2] = {s.share.vocab.begin, s.share.vocab.size()};
  std::vector<int64_t> ranges(2 * s.ranks);
  r.exchange.all_gather(range, ranges.data(), sizeof range);
  int64_t most = 0;
  for (int k = 0; k < s.ranks; ++k) most = std::max(most, ranges[2 * k + 1]);
  std::vector<float> padded(static_cast<size_t>(n) * most), gathered(padded.size() * s.ranks);
  for (int i = 0; i < n; ++i) std::copy_n(mine.begin() + i * range[1], range[1], padded.begin() + i * most);
  r.exchange.all_gather(padded.data(), gathered.data(), padded.size() * sizeof(float));
  for (int k = 0; k < s.ranks; ++k)
    for (int i = 0; i < n; ++i)
      std::copy_n(gathered.begin() + (static_cast<size_t>(k) * n + i) * most, ranges[2 * k + 1],
                  all.begin() + i * vocab + ranges[2 * k]);
  return all;
}

nlohmann::json mean_json(const Mean& m) { return {{"value", m.value}, {"error", m.error}}; }

void print_kl_report(const KlReport& k) {
  std::printf("====== Perplexity statistics ======\n");
  std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", k.ppl.value, k.ppl.error);
  std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", k.base_ppl.value, k.base_ppl.error);
  std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * k.log_ppl_correlation);
  std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", k.log_ppl_ratio.value, k.log_ppl_ratio.error);
  std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", k.ppl_ratio.value, k.ppl_ratio.error);
  std::printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", k.ppl_difference.value, k.ppl_difference.error);
  std::printf("\n====== KL divergence statistics ======\n");
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", k.kl.value, k.kl.error);
  for (const auto& q : k.kl_quantiles) std::printf("%-7s KLD: %10.6f\n", q.name, q.value);
  std::printf("\n====== Token probability statistics ======\n");
  std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * k.delta_p.value, 100 * k.delta_p.error);
  for (const auto& q : k.delta_p_quantiles) std::printf("%-7s Δp: %6.3f%%\n", q.name, 100 * q.value);
  std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * k.rms_delta_p.value, 100 * k.rms_delta_p.error);
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100 * k.same_top.value, 100 * k.same_top.error);
}

nlohmann::json kl_json(const KlReport& k) {
  nlohmann::json j = {{"ppl", mean_json(k.ppl)},
                      {"base_ppl", mean_json(k.base_ppl)},
                      {"log_ppl_correlation", k.log_ppl_correlation},
                      {"log_ppl_ratio", mean_json(k.log_ppl_ratio)},
                      {"ppl_ratio", mean_json(k.ppl_ratio)},
                      {"ppl_difference", mean_json(k.ppl_difference)},
                      {"kl_divergence", mean_json(k.kl)},
                      {"same_top", mean_json(k.same_top)},
                      {"delta_p", mean_json(k.delta_p)},
                      {"rms_delta_p", mean_json(k.rms_delta_p)}};
  for (const auto& q : k.kl_quantiles) j["kl_divergence_quantiles"][q.name] = q.value;
  for (const auto& q : k.delta_p_quantiles) j["delta_p_quantiles"][q.name] = q.value;
  return j;
}

}  // namespace

RunMode add_perplexity_command(CLI::App& app, PerplexityOptions& p) {
  CLI::App* perplexity = app.add_subcommand(
      "perplexity",
      "how well the model predicts a text, as llama-perplexity measures it: windows of --ctx tokens "
      "(default 512), the second half of each scored; perplexity with its error, or with --kl-base the KL "
      "divergence, top-1 agreement and token-probability changes against a base model (uses -m, --ctx, "
      "--batch, --json; progress on stderr)");
  auto* text = perplexity->add_option("-f,--file", p.text_file, "the text");
  auto* chunks = perplexity->add_option("--chunks", p.chunks, "score this many windows at most")->check(kPositive);
  auto* save = perplexity->add_option(
      "--save-logits", p.save_logits,
      "write each scored position's log-probabilities to this file, a base for --kl-base (llama-perplexity's "
      "--kl-divergence-base format: either engine reads the other's)");
  perplexity
      ->add_option("--kl-base", p.kl_base,
                   "compare with the log-probabilities saved in this file, on its text and windows")
      ->excludes(text)
      ->excludes(save)
      ->excludes(chunks);
  perplexity->callback([&p, text] {
    if (p.kl_base.empty() && text->count() == 0)
      throw CLI::ValidationError("perplexity: give the text with -f FILE, or a base with --kl-base FILE");
  });
  perplexity->fallthrough();
  return {perplexity, {run_group::model, run_group::output}};
}

int run_perplexity(const RunOptions& options, const PerplexityOptions& p, const MpiSession& mpi,
                   const RankSetup& setup) {
  std::optional<LogitsFile> base;
  if (!p.kl_base.empty()) base.emplace(p.kl_base);
  GgufFile file = open_model(options, mpi);  // read here for the windows, then loaded
  const Windows w = windows(p, base, file);
  const bool scorer = mpi.rank() == 0;
  std::unique_ptr<LogitsFileWriter> save;  // opened first: a path it cannot write is said before the load
  if (scorer && !p.save_logits.empty()) {
    std::vector<std::string> inputs{p.text_file};  // never replaced by what is written
    for (int i = 0; i < file.parts(); ++i) inputs.push_back(file.part(i).path());
    save = std::make_unique<LogitsFileWriter>(p.save_logits, w.size, w.n_vocab, w.tokens, inputs, "--save-logits");
  }
  RunOptions o = options;
  o.context = w.size;
  // A step's rows of logits: the rank's, and whole_rows' padded, gathered
  // and whole copies.
  const uint64_t rows_bytes = 3 * uint64_t{kScoredPerStep} * w.n_vocab * sizeof(float);
  RankRun r(o, mpi, setup, Clock::now(), std::move(file), rows_bytes);
  Session session(r.model, r.session_options(o, w.size), r.pool, r.exchange);
  PerplexityStats ppl;
  KlStats kl;
  const int first = first_scored(w.size);
  const int64_t vocab = r.model.config.n_vocab;
  int64_t row = 0;  // scored positions so far
  std::vector<float> logits;
  const auto t0 = Clock::now();
  for (int c = 0; c < w.chunks; ++c) {
    std::vector<int32_t> in(w.tokens.begin() + static_cast<int64_t>(c) * w.size,
                            w.tokens.begin() + static_cast<int64_t>(c + 1) * w.size);
    const std::vector<int32_t> next = in;  // what each position predicts
    if (w.add_bos) in[0] = w.bos;
    session.restart();
    session.forward(std::span<const int32_t>(in).first(first), false, logits);
    for (int at = first; at < w.size - 1; at += kScoredPerStep) {
      const int n = std::min(kScoredPerStep, w.size - 1 - at);
      session.forward(std::span<const int32_t>(in).subspan(at, n), true, logits);
      const std::vector<float> rows = whole_rows(r, logits, n);
      if (!scorer) continue;
      for (int i = 0; i < n; ++i, ++row) {
        const std::span<const float> l(rows.data() + i * vocab, vocab);
        const int32_t token = next[at + i + 1];
        if (base) {
          kl.add(compare(l, base->row(row), token));
        } else {
          ppl.add(-log_softmax(l).logprob(l[token]));
          if (save) save->add(l);
        }
      }
    }
    if (scorer)
      log_info("perplexity: window ", c + 1, "/", w.chunks, ": PPL ", base ? kl.ppl() : ppl.ppl(),
               base ? cat(", KL ", kl.mean_kl()) : "", " (", fmt::format("{:.1f}", seconds_since(t0) / (c + 1)),
               " s a window)");
  }
  if (!scorer) return 0;
  if (save) save->finish();
  const double seconds = seconds_since(t0);
  nlohmann::json j = {{"engine", "tps"},
                      {"model", o.model},
                      {"window", w.size},
                      {"windows", w.chunks},
                      {"scored_tokens", base ? kl.tokens() : ppl.tokens()},
                      {"seconds", seconds},
                      {"split", split_mode_name(r.shard().mode)},
                      {"ranks", mpi.size()},
                      {"kv_type", kv_type_name(o.kv_type)}};
  if (base) {
    const KlReport k = kl.report();
    j["base"] = base->path();
    j["kl"] = kl_json(k);
    if (o.json)
      print_json(j);
    else
      print_kl_report(k);
  } else {
    j["ppl"] = {{"value", ppl.ppl()}, {"error", ppl.ppl_error()}};
    if (save) j["saved_logits"] = p.save_logits;
    if (o.json)
      print_json(j);
    else
      std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl.ppl(), ppl.ppl_error());
  }
  return 0;
}

}  // namespace tps
