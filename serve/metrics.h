// What the server counts, and the one table both GET /metrics (Prometheus
// text) and GET /v1/status (the web page's panel) are written from:
// requests by route and status (serve/http/request_counts.h), tokens in and
// out (and those taken from the prefix cache), the forward steps, the queue,
// the running sequences, the KV pool, the prefix cache's RAM and disk
// tiers, the Responses API's store, and tokens/s over the last seconds.
// Updated by the engine loop and the HTTP threads; safe to read from any
// thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "runtime/clock.h"
#include "serve/http/request_counts.h"
#include "serve/responses/response_store.h"

namespace tps {

// The prefix cache's RAM tier (--cache-ram) as rank 0 sees it: its slots
// and bytes on rank 0, and its traffic (engine/sched/scheduler.h TierStats).
struct PromptCacheStats {
  int64_t full_blocks = 0, sliding_blocks = 0, full_used = 0;
  uint64_t bytes = 0, max_bytes = 0;
  int64_t saved = 0, restored = 0, evicted = 0, hits = 0, misses = 0;
  // Its disk tier (--cache-dir) on rank 0 (engine/cache/disk_tier.h Stats).
  bool disk = false;
  int64_t disk_files = 0, disk_bytes = 0, disk_loaded = 0, disk_written = 0, disk_write_failures = 0;
};

// Speculative decoding on rank 0 (engine/sched/scheduler.h DraftStats): the
// drafts checked, their tokens, those taken, and the ended sequences' tokens
// kept to draft from (engine/sched/drafter.h DraftCorpus).
struct SpeculationStats {
  int64_t verifies = 0, drafted = 0, taken = 0, corpus_tokens = 0;
};

// Every figure at one moment.
struct MetricsSnapshot {
  int64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0, steps = 0, step_tokens = 0;
  int waiting = 0, running = 0, kv_held = 0, kv_cached = 0, kv_total = 0;  // KV: full-attention blocks
  PromptCacheStats cache;
  SpeculationStats speculation;
  ResponseStoreStats store;
  double tokens_per_second = 0;  // over the last 10 s
};

// One figure, listed once: its name in /metrics (after "tps_"; null: not
// there), its type and HELP text; its place in /v1/status (an object's
// key, "" for the top level; key null: not there); and how it is read.
// get() returns the figure as JSON so that /v1/status keeps integers
// integers; /metrics shows it as a double.
struct MetricRow {
  const char* name;
  const char* type;  // "counter" or "gauge"
  const char* help;
  const char* status_object;
  const char* status_key;
  nlohmann::json (*get)(const MetricsSnapshot&);
};
extern const std::span<const MetricRow> kMetricRows;

class Metrics {
 public:
  // A request answered, counted under its route (RequestCounts).
  void request(std::string_view path, int status) { requests_.add(path, status); }
  RequestCounts& requests() { return requests_; }
  void prompt_tokens(int64_t n, int64_t cached) { prompt_tokens_ += n, cached_tokens_ += cached; }
  void generated_token();
  void set_load(int waiting, int running, int kv_held, int kv_cached, int kv_total);
  void set_steps(int64_t steps, int64_t tokens) { steps_ = steps, step_tokens_ = tokens; }
  // The Responses API's store and the prefix cache, as the next snapshot shows them.
  void set_response_store(const ResponseStoreStats& s) {
    std::lock_guard<std::mutex> lock(m_);
    store_ = s;
  }
  void set_prompt_cache(const PromptCacheStats& s) {
    std::lock_guard<std::mutex> lock(m_);
    cache_ = s;
  }
  void set_speculation(const SpeculationStats& s) {
    std::lock_guard<std::mutex> lock(m_);
    speculation_ = s;
  }

  // Generated tokens per second over the last `window` seconds.
  double tokens_per_second(double window = 10) const;
  MetricsSnapshot snapshot() const;
  // The Prometheus text exposition (version 0.0.4): requests_total, then
  // kMetricRows' figures in their order.
  std::string prometheus() const;
  // /v1/status's figures: kMetricRows' under their objects and keys.
  nlohmann::json status() const;

 private:
  RequestCounts requests_;
  mutable std::mutex m_;
  std::deque<Clock::time_point> recent_;  // generated tokens' times, last 60 s
  ResponseStoreStats store_;
  PromptCacheStats cache_;
  SpeculationStats speculation_;
  std::atomic<int64_t> prompt_tokens_{0}, cached_tokens_{0}, generated_tokens_{0}, steps_{0}, step_tokens_{0};
  std::atomic<int> waiting_{0}, running_{0}, kv_held_{0}, kv_cached_{0}, kv_total_{0};
};

}  // namespace tps
