#include "serve/metrics.h"

#include "runtime/error.h"

namespace tps {

void Metrics::generated_token() {
  ++generated_tokens_;
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(m_);
  recent_.push_back(now);
  while (!recent_.empty() && now - recent_.front() > std::chrono::seconds(60)) recent_.pop_front();
}

void Metrics::set_load(int waiting, int running, int kv_held, int kv_cached, int kv_total) {
  waiting_ = waiting, running_ = running, kv_held_ = kv_held, kv_cached_ = kv_cached, kv_total_ = kv_total;
}

double Metrics::tokens_per_second(double window) const {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(m_);
  int64_t n = 0;
  for (auto it = recent_.rbegin(); it != recent_.rend() && std::chrono::duration<double>(now - *it).count() < window;
       ++it)
    ++n;
  return n / window;
}

std::string Metrics::prometheus() const {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& value) {
    out += cat("# HELP tps_", name, " ", help, "\n# TYPE tps_", name, " ", type, "\n");
    out += value;
  };
  // A metric of one unlabelled sample.
  auto single = [&](const char* name, const char* type, const char* help, double v) {
    metric(name, type, help, cat("tps_", name, " ", v, "\n"));
  };
  metric("requests_total", "counter", "HTTP requests answered, by endpoint and status.", requests_.samples());
  single("prompt_tokens_total", "counter", "Prompt tokens of the requests served.",
         static_cast<double>(prompt_tokens_));
  single("prompt_tokens_cached_total", "counter", "Prompt tokens taken from the prefix cache.",
         static_cast<double>(cached_tokens_));
  single("generated_tokens_total", "counter", "Tokens generated.", static_cast<double>(generated_tokens_));
  single("steps_total", "counter", "Forward steps run.", static_cast<double>(steps_));
  single("step_tokens_total", "counter", "Tokens the forward steps carried.", static_cast<double>(step_tokens_));
  single("requests_waiting", "gauge", "Requests waiting for a place (queue depth).", waiting_);
  single("requests_running", "gauge", "Sequences running.", running_);
  single("kv_blocks_used", "gauge", "KV pool blocks (full-attention layers) held by running sequences.", kv_held_);
  single("kv_blocks_cached", "gauge", "KV pool blocks kept for prefix reuse and held by no sequence.", kv_cached_);
  single("kv_blocks_total", "gauge", "KV pool blocks (full-attention layers).", kv_total_);
  const PromptCacheStats cache = prompt_cache();
  single("cache_ram_blocks_total", "gauge",
         "Full-attention blocks the prefix cache's RAM tier (--cache-ram) holds at most.",
         static_cast<double>(cache.full_blocks));
  single("cache_ram_blocks_used", "gauge", "Full-attention blocks in the prefix cache's RAM tier.",
         static_cast<double>(cache.full_used));
  single("cache_ram_bytes", "gauge", "Bytes the RAM tier has allocated on rank 0.", static_cast<double>(cache.bytes));
  single("cache_ram_max_bytes", "gauge", "Bytes the RAM tier may take on rank 0 (within --cache-ram).",
         static_cast<double>(cache.max_bytes));
  single("cache_ram_saved_blocks_total", "counter", "KV blocks saved to the RAM tier as the pool reused them.",
         static_cast<double>(cache.saved));
  single("cache_ram_restored_blocks_total", "counter", "KV blocks copied back from the RAM tier.",
         static_cast<double>(cache.restored));
  single("cache_ram_evicted_blocks_total", "counter", "KV blocks the RAM tier let go for newer ones.",
         static_cast<double>(cache.evicted));
  single("cache_ram_hits_total", "counter", "Prompts that got blocks back from the RAM tier.",
         static_cast<double>(cache.hits));
  single("cache_ram_misses_total", "counter",
         "Prompts whose prefix lookup ended on a block in neither the pool nor the RAM tier.",
         static_cast<double>(cache.misses));
  single("cache_disk_files", "gauge", "Rank 0's block files in the disk tier's directory (--cache-dir).",
         static_cast<double>(cache.disk_files));
  single("cache_disk_bytes", "gauge", "Bytes of rank 0's block files in the disk tier.",
         static_cast<double>(cache.disk_bytes));
  single("cache_disk_loaded_blocks", "gauge", "Blocks loaded from the disk tier into the RAM tier at start.",
         static_cast<double>(cache.disk_loaded));
  single("cache_disk_written_blocks_total", "counter", "Blocks written to the disk tier as they entered the RAM tier.",
         static_cast<double>(cache.disk_written));
  single("cache_disk_write_failures_total", "counter",
         "Writes to the disk tier that failed (the first turns the disk tier off).",
         static_cast<double>(cache.disk_write_failures));
  ResponseStoreStats store;
  {
    std::lock_guard<std::mutex> lock(m_);
    store = store_;
  }
  single("responses_stored", "gauge", "Responses the Responses API holds for GET and previous_response_id.",
         static_cast<double>(store.count));
  single("responses_stored_bytes", "gauge", "Bytes of the stored responses (their JSON and token ids).",
         static_cast<double>(store.bytes));
  single("responses_hits_total", "counter", "Follow-ups whose previous_response_id was stored.",
         static_cast<double>(store.hits));
  single("responses_misses_total", "counter", "Follow-ups whose previous_response_id was not (a 404).",
         static_cast<double>(store.misses));
  single("responses_evictions_total", "counter", "Stored responses let go for --responses-max or --responses-mib.",
         static_cast<double>(store.evictions));
  single("generated_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.",
         tokens_per_second());
  return out;
}

}  // namespace tps
