#include "launch/generate_command.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/forward.h"
#include "engine/harmony.h"
#include "engine/model.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "topology/binding.h"

namespace tps {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

Model load(const std::string& path) {
  auto t0 = Clock::now();
  bool shown = false;
  int last_percent = -1;
  Model m = load_model(path, [&](uint64_t done, uint64_t total) {
    if (total < (1ull << 30) || log_level() < LogLevel::info) return;  // small files load at once
    const int percent = static_cast<int>(100 * done / total);
    if (percent / 5 == last_percent / 5) return;
    last_percent = percent;
    std::fprintf(stderr, "\rtps: loading %s: %3d%% of %.1f GB", path.c_str(), percent, total / 1e9);
    shown = true;
  });
  if (shown) std::fputc('\n', stderr);
  log_info("tps: model ", path, ": ", m.config.n_layer, " layers, ", m.config.n_expert,
           " experts (top-", m.config.n_expert_used, "), d=", m.config.n_embd, "; loaded in ",
           cat(static_cast<int>(since(t0) * 1000)), " ms; kernels: ",
           isa_name(best_dot_kernels().isa));
  return m;
}

ThreadPool make_pool(int threads, const std::vector<int>& pus) {
  if (!pus.empty()) bind_this_thread({pus[0]});
  return ThreadPool(threads, [&pus](int t) {
    if (!pus.empty()) bind_this_thread({pus[t % pus.size()]});
  });
}

nlohmann::json logprob_entry(std::span<const float> logits, int32_t id, int k) {
  nlohmann::json top = nlohmann::json::array();
  for (const TokenLogprob& t : top_logprobs(logits, k)) top.push_back({t.id, t.logprob});
  return {{"id", id}, {"logprob", logprob_of(logits, id)}, {"top", top}};
}

}  // namespace

int run_generate(const RunOptions& o, int threads, const std::vector<int>& thread_pus) {
  SamplerParams sp = o.sampler;
  if (!o.seed_given) sp.seed = std::random_device{}();
  validate(sp);
  if (o.max_tokens < 0) throw InputError(cat("-n ", o.max_tokens, ": expected >= 0"));
  if (o.prompt.empty()) throw InputError("-p: the prompt is empty");

  Model m = load(o.model);
  std::vector<int32_t> prompt =
      o.chat ? render_chat_prompt(o.prompt, ChatOptions{"", o.reasoning, ""},
                                  [&](const std::string& s) { return m.tokenizer.encode(s); })
             : m.tokenizer.encode(o.prompt, true);
  if (static_cast<int>(prompt.size()) > o.ctx)
    throw InputError(cat("the prompt is ", prompt.size(), " tokens, longer than the context of ",
                         o.ctx, " (use --ctx, up to ", m.config.n_ctx_train, ")"));

  ThreadPool pool = make_pool(threads, thread_pus);
  SessionOptions so;
  so.n_ctx = o.ctx;
  so.max_batch = o.batch;
  so.yarn_truncate = o.yarn_truncate;
  Session session(m.config, m.weights, so, pool, best_dot_kernels());
  Sampler sampler(sp);

  auto t0 = Clock::now();
  std::vector<float> logits;
  session.forward(prompt, false, logits);
  const double prefill_s = since(t0);

  std::vector<int32_t> out;
  nlohmann::json logprobs = nlohmann::json::array();
  Utf8Stream text;
  HarmonyStream harmony;
  std::string generated_text;
  std::string stop = "length";
  double ttft = 0;
  auto t1 = Clock::now();
  session.reset_timings();  // from here on: decode steps only
  for (int i = 0; i < o.max_tokens; ++i) {
    const int32_t id = sampler.sample(logits);
    if (i == 0) ttft = since(t0);
    out.push_back(id);
    if (o.top_logprobs > 0) logprobs.push_back(logprob_entry(logits, id, o.top_logprobs));
    if (is_stop_token(id)) {
      stop = "stop token";
      break;
    }
    const std::string& piece = m.tokenizer.token_bytes(id);
    bool show = true;
    if (o.chat) {
      HarmonyStream::Step st = harmony.push(id, piece);
      show = st.part == HarmonyStream::Part::content &&
             (st.channel.starts_with("final") || (o.show_analysis && !st.channel.empty()));
    }
    if (show) {
      std::string printable = text.push(piece);
      generated_text += printable;
      if (!o.json) {
        std::fwrite(printable.data(), 1, printable.size(), stdout);
        std::fflush(stdout);
      }
    }
    if (i + 1 == o.max_tokens) break;
    if (session.position() >= session.context()) {
      stop = "context full";
      break;
    }
    session.forward(std::vector<int32_t>{id}, false, logits);
  }
  const double decode_s = since(t1);
  std::string tail = text.flush();
  generated_text += tail;
  const int n_gen = static_cast<int>(out.size());
  // Decode speed counts the forward steps after the first token.
  const double decode_tps = n_gen > 1 ? (n_gen - 1) / std::max(decode_s, 1e-9) : 0;
  const double prefill_tps = prompt.size() / std::max(prefill_s, 1e-9);

  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"prompt_tokens", prompt.size()},
                        {"prompt_ids", prompt},
                        {"prefill_tokens_per_s", prefill_tps},
                        {"time_to_first_token_s", ttft},
                        {"generated_tokens", n_gen},
                        {"generated_ids", out},
                        {"text", generated_text},
                        {"decode_tokens_per_s", decode_tps},
                        {"decode_weight_bytes_per_token", decode_bytes_per_token(m.weights, m.config)},
                        {"stop", stop},
                        {"seed", sp.seed},
                        {"threads", threads},
                        {"kernels", isa_name(best_dot_kernels().isa)},
                        {"peak_rss_mib", peak_rss_mib()}};
    if (o.top_logprobs > 0) j["logprobs"] = logprobs;
    const Session::Timings& tm = session.timings();
    j["decode_seconds_by_part"] = {{"qkv_projection", tm.qkv},   {"attention", tm.attention},
                                   {"output_projection", tm.output_proj},
                                   {"router", tm.router},        {"experts", tm.experts},
                                   {"logits", tm.logits}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (o.top_logprobs > 0)
      for (size_t i = 0; i < logprobs.size(); ++i)
        std::fprintf(stderr, "tps: token %zu: %s\n", i, logprobs[i].dump().c_str());
    log_info("tps: prompt ", prompt.size(), " tokens at ",
             cat(static_cast<int>(prefill_tps * 10) / 10.0), " tok/s; first token after ",
             cat(static_cast<int>(ttft * 1000)), " ms; generated ", n_gen, " tokens at ",
             cat(static_cast<int>(decode_tps * 100) / 100.0), " tok/s (", stop, "); ", threads,
             " thread(s); peak RSS ", cat(static_cast<int>(peak_rss_mib())), " MiB");
  }
  return 0;
}

int run_score(const RunOptions& o, int threads, const std::vector<int>& thread_pus) {
  std::ifstream in(o.ids_file);
  if (!in) throw InputError(cat(o.ids_file, ": cannot read the token ids"));
  std::vector<int32_t> ids;
  for (std::string word; in >> word;) {
    try {
      size_t used = 0;
      long v = std::stol(word, &used);
      if (used != word.size()) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw InputError(cat(o.ids_file, ": '", word, "' is not a token id"));
    }
  }
  if (ids.size() < 2) throw InputError(cat(o.ids_file, ": need at least 2 token ids to score"));
  Model m = load(o.model);
  ThreadPool pool = make_pool(threads, thread_pus);
  SessionOptions so;
  so.n_ctx = std::max<int>(o.ctx, static_cast<int>(ids.size()));
  so.max_batch = o.batch;
  so.yarn_truncate = o.yarn_truncate;
  Session session(m.config, m.weights, so, pool, best_dot_kernels());
  std::vector<float> logits;
  auto t0 = Clock::now();
  session.forward(ids, true, logits);
  const double s = since(t0);
  const size_t V = m.config.n_vocab;
  const int k = std::max(o.top_logprobs, 1);
  nlohmann::json positions = nlohmann::json::array();
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    std::span<const float> row(logits.data() + i * V, V);
    nlohmann::json top = nlohmann::json::array();
    for (const TokenLogprob& t : top_logprobs(row, k)) top.push_back({t.id, t.logprob});
    positions.push_back(
        {{"pos", i}, {"next", ids[i + 1]}, {"next_logprob", logprob_of(row, ids[i + 1])}, {"top", top}});
  }
  nlohmann::json j = {{"engine", "tps"},
                      {"model", o.model},
                      {"tokens", ids.size()},
                      {"seconds", s},
                      {"yarn_truncate", o.yarn_truncate},
                      {"positions", positions}};
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (const auto& p : positions)
      std::printf("%4d next %6d logprob %8.4f top %s\n", p["pos"].get<int>(), p["next"].get<int>(),
                  p["next_logprob"].get<float>(), p["top"].dump().c_str());
  }
  return 0;
}

}  // namespace tps
