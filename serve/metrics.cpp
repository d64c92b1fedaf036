#include "serve/metrics.h"

#include "engine/step/batch.h"
#include "runtime/error.h"

namespace tps {

namespace {

using json = nlohmann::json;
using S = MetricsSnapshot;

// In /metrics' order. /v1/status's objects: sequences, kv, cache_ram,
// cache_disk, speculation, responses (and tokens_per_second at the top).
constexpr MetricRow kRows[] = {
    {"prompt_tokens_total", "counter", "Prompt tokens of the requests served.", nullptr, nullptr,
     [](const S& s) -> json { return s.prompt_tokens; }},
    {"prompt_tokens_cached_total", "counter", "Prompt tokens taken from the prefix cache.", nullptr, nullptr,
     [](const S& s) -> json { return s.cached_tokens; }},
    {"generated_tokens_total", "counter", "Tokens generated.", nullptr, nullptr,
     [](const S& s) -> json { return s.generated_tokens; }},
    {"steps_total", "counter", "Forward steps run.", nullptr, nullptr, [](const S& s) -> json { return s.steps; }},
    {"step_tokens_total", "counter", "Tokens the forward steps carried.", nullptr, nullptr,
     [](const S& s) -> json { return s.step_tokens; }},
    {"requests_waiting", "gauge", "Requests waiting for a place (queue depth).", "sequences", "waiting",
     [](const S& s) -> json { return s.waiting; }},
    {"requests_running", "gauge", "Sequences running.", "sequences", "running",
     [](const S& s) -> json { return s.running; }},
    {"kv_blocks_used", "gauge", "KV pool blocks (full-attention layers) held by running sequences.", "kv",
     "blocks_used", [](const S& s) -> json { return s.kv_held; }},
    {"kv_blocks_cached", "gauge", "KV pool blocks kept for prefix reuse and held by no sequence.", "kv",
     "blocks_cached", [](const S& s) -> json { return s.kv_cached; }},
    {"kv_blocks_total", "gauge", "KV pool blocks (full-attention layers).", "kv", "blocks_total",
     [](const S& s) -> json { return s.kv_total; }},
    {nullptr, nullptr, nullptr, "kv", "block_positions", [](const S&) -> json { return kKvBlock; }},
    {"cache_ram_blocks_total", "gauge",
     "Full-attention blocks the prefix cache's RAM tier (--cache-ram) holds at most.", "cache_ram", "blocks_total",
     [](const S& s) -> json { return s.cache.full_blocks; }},
    {"cache_ram_blocks_used", "gauge", "Full-attention blocks in the prefix cache's RAM tier.", "cache_ram",
     "blocks_used", [](const S& s) -> json { return s.cache.full_used; }},
    {nullptr, nullptr, nullptr, "cache_ram", "sliding_blocks_total",
     [](const S& s) -> json { return s.cache.sliding_blocks; }},
    {"cache_ram_bytes", "gauge", "Bytes the RAM tier has allocated on rank 0.", "cache_ram", "bytes",
     [](const S& s) -> json { return s.cache.bytes; }},
    {"cache_ram_max_bytes", "gauge", "Bytes the RAM tier may take on rank 0 (within --cache-ram).", "cache_ram",
     "max_bytes", [](const S& s) -> json { return s.cache.max_bytes; }},
    {"cache_ram_saved_blocks_total", "counter", "KV blocks saved to the RAM tier as the pool reused them.", "cache_ram",
     "saved_blocks", [](const S& s) -> json { return s.cache.saved; }},
    {"cache_ram_restored_blocks_total", "counter", "KV blocks copied back from the RAM tier.", "cache_ram",
     "restored_blocks", [](const S& s) -> json { return s.cache.restored; }},
    {"cache_ram_evicted_blocks_total", "counter", "KV blocks the RAM tier let go for newer ones.", "cache_ram",
     "evicted_blocks", [](const S& s) -> json { return s.cache.evicted; }},
    {"cache_ram_hits_total", "counter", "Prompts that got blocks back from the RAM tier.", "cache_ram", "hits",
     [](const S& s) -> json { return s.cache.hits; }},
    {"cache_ram_misses_total", "counter",
     "Prompts whose prefix lookup ended on a block in neither the pool nor the RAM tier.", "cache_ram", "misses",
     [](const S& s) -> json { return s.cache.misses; }},
    {nullptr, nullptr, nullptr, "cache_disk", "on", [](const S& s) -> json { return s.cache.disk; }},
    {"cache_disk_files", "gauge", "Rank 0's block files in the disk tier's directory (--cache-dir).", "cache_disk",
     "files", [](const S& s) -> json { return s.cache.disk_files; }},
    {"cache_disk_bytes", "gauge", "Bytes of rank 0's block files in the disk tier.", "cache_disk", "bytes",
     [](const S& s) -> json { return s.cache.disk_bytes; }},
    {"cache_disk_loaded_blocks", "gauge", "Blocks loaded from the disk tier into the RAM tier at start.", "cache_disk",
     "loaded_blocks", [](const S& s) -> json { return s.cache.disk_loaded; }},
    {"cache_disk_written_blocks_total", "counter", "Blocks written to the disk tier as they entered the RAM tier.",
     "cache_disk", "written_blocks", [](const S& s) -> json { return s.cache.disk_written; }},
    {"cache_disk_write_failures_total", "counter",
     "Writes to the disk tier that failed (the first turns the disk tier off).", "cache_disk", "write_failures",
     [](const S& s) -> json { return s.cache.disk_write_failures; }},
    {"speculation_verify_steps_total", "counter", "Decoding steps of a sequence that checked a draft (--speculate).",
     "speculation", "verify_steps", [](const S& s) -> json { return s.speculation.verifies; }},
    {"speculation_drafted_tokens_total", "counter", "Drafted tokens checked.", "speculation", "drafted_tokens",
     [](const S& s) -> json { return s.speculation.drafted; }},
    {"speculation_taken_tokens_total", "counter",
     "Drafted tokens that were the model's choices: tokens generated without a step of their own.", "speculation",
     "taken_tokens", [](const S& s) -> json { return s.speculation.taken; }},
    {"speculation_corpus_tokens", "gauge", "Tokens of ended sequences kept on rank 0 for drafts to come from.",
     "speculation", "corpus_tokens", [](const S& s) -> json { return s.speculation.corpus_tokens; }},
    {"responses_stored", "gauge", "Responses the Responses API holds for GET and previous_response_id.", "responses",
     "stored", [](const S& s) -> json { return s.store.count; }},
    {"responses_stored_bytes", "gauge", "Bytes of the stored responses (their JSON and token ids).", "responses",
     "bytes", [](const S& s) -> json { return s.store.bytes; }},
    {nullptr, nullptr, nullptr, "responses", "max_stored", [](const S& s) -> json { return s.store.max_count; }},
    {nullptr, nullptr, nullptr, "responses", "max_bytes", [](const S& s) -> json { return s.store.max_bytes; }},
    {"responses_hits_total", "counter", "Follow-ups whose previous_response_id was stored.", "responses", "hits",
     [](const S& s) -> json { return s.store.hits; }},
    {"responses_misses_total", "counter", "Follow-ups whose previous_response_id was not (a 404).", "responses",
     "misses", [](const S& s) -> json { return s.store.misses; }},
    {"responses_evictions_total", "counter", "Stored responses let go for --responses-max or --responses-mib.",
     "responses", "evictions", [](const S& s) -> json { return s.store.evictions; }},
    {"generated_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.", "", "tokens_per_second",
     [](const S& s) -> json { return s.tokens_per_second; }},
};

}  // namespace

const std::span<const MetricRow> kMetricRows = kRows;

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

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot s;
  s.prompt_tokens = prompt_tokens_, s.cached_tokens = cached_tokens_, s.generated_tokens = generated_tokens_;
  s.steps = steps_, s.step_tokens = step_tokens_;
  s.waiting = waiting_, s.running = running_, s.kv_held = kv_held_, s.kv_cached = kv_cached_, s.kv_total = kv_total_;
  {
    std::lock_guard<std::mutex> lock(m_);
    s.cache = cache_, s.speculation = speculation_, s.store = store_;
  }
  s.tokens_per_second = tokens_per_second();
  return s;
}

std::string Metrics::prometheus() const {
  std::string out;
  auto header = [&](const char* name, const char* type, const char* help) {
    out += cat("# HELP tps_", name, " ", help, "\n# TYPE tps_", name, " ", type, "\n");
  };
  header("requests_total", "counter", "HTTP requests answered, by endpoint and status.");
  out += requests_.samples();
  const MetricsSnapshot s = snapshot();
  for (const MetricRow& row : kMetricRows) {
    if (!row.name) continue;
    header(row.name, row.type, row.help);
    out += cat("tps_", row.name, " ", row.get(s).get<double>(), "\n");
  }
  return out;
}

nlohmann::json Metrics::status() const {
  const MetricsSnapshot s = snapshot();
  json j = json::object();
  for (const MetricRow& row : kMetricRows) {
    if (!row.status_key) continue;
    json& place = *row.status_object ? j[row.status_object] : j;
    place[row.status_key] = row.get(s);
  }
  return j;
}

}  // namespace tps
