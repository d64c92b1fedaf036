// What the server counts, for GET /metrics (Prometheus text) and the web
// page's status panel: requests by endpoint and status
// (serve/http/request_counts.h), tokens in and out
// (and those taken from the prefix cache), the Responses API's store, the queue, the running
// sequences, the KV pool and the prefix cache's RAM tier, and tokens/s over the last seconds. Updated by
// the engine loop and the HTTP threads; every field is safe to read from
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
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
  // Its disk tier (--cache-dir) on rank 0 (engine/step/disk_tier.h Stats).
  bool disk = false;
  int64_t disk_files = 0, disk_bytes = 0, disk_loaded = 0, disk_written = 0, disk_write_failures = 0;
};

class Metrics {
 public:
  // A request answered, counted under its route (RequestCounts).
  void request(std::string_view path, int status) { requests_.add(path, status); }
  RequestCounts& requests() { return requests_; }
  void prompt_tokens(int64_t n, int64_t cached) { prompt_tokens_ += n, cached_tokens_ += cached; }
  void generated_token();
  void set_load(int waiting, int running, int kv_held, int kv_cached, int kv_total);
  void set_steps(int64_t steps, int64_t tokens) { steps_ = steps, step_tokens_ = tokens; }
  // The Responses API's store, as the exposition shows it next.
  void set_response_store(const ResponseStoreStats& s) {
    std::lock_guard<std::mutex> lock(m_);
    store_ = s;
  }

  void set_prompt_cache(const PromptCacheStats& s) {
    std::lock_guard<std::mutex> lock(m_);
    cache_ = s;
  }
  PromptCacheStats prompt_cache() const {
    std::lock_guard<std::mutex> lock(m_);
    return cache_;
  }

  // Generated tokens per second over the last `window` seconds.
  double tokens_per_second(double window = 10) const;
  int waiting() const { return waiting_; }
  int running() const { return running_; }
  struct Kv {
    int held, cached, total;  // full-attention blocks
  };
  Kv kv() const { return {kv_held_, kv_cached_, kv_total_}; }
  // The Prometheus text exposition (version 0.0.4).
  std::string prometheus() const;

 private:
  RequestCounts requests_;
  mutable std::mutex m_;
  std::deque<Clock::time_point> recent_;  // generated tokens' times, last 60 s
  ResponseStoreStats store_;
  PromptCacheStats cache_;
  std::atomic<int64_t> prompt_tokens_{0}, cached_tokens_{0}, generated_tokens_{0}, steps_{0}, step_tokens_{0};
  std::atomic<int> waiting_{0}, running_{0}, kv_held_{0}, kv_cached_{0}, kv_total_{0};
};

}  // namespace tps
