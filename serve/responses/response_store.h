// The responses the Responses API stores (`store`, true by default), for
// GET /v1/responses/{id}, its input_items, DELETE, and `previous_response_id`:
// each keeps its response object, its input items, and its conversation as
// token ids (engine/text/conversation_ids.h) so that a follow-up's prompt begins
// with exactly the ids whose KV blocks the prefix cache may still hold. The
// ids outlive the blocks: a follow-up after the pool let them go computes
// them again.
//
// Bounded by a count and a byte budget (--responses-max, --responses-mib):
// past either, the least recently used response goes. Thread-safe; a
// response is immutable once stored and shared with the requests reading it,
// so concurrent follow-ups to the same response read the same state.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/text/conversation_ids.h"

namespace tps {

struct StoredResponse {
  nlohmann::ordered_json response;           // as GET returns it
  nlohmann::ordered_json input_items;        // this request's input, as items with ids
  std::vector<MessageIds> messages;          // the conversation after its header, output included
  std::string item_instructions;             // system and developer input items' text, carried to follow-ups
  std::map<std::string, std::string> calls;  // call_id -> function name, of every call so far
  // What it costs the store (its JSON as text, its ids, its strings).
  size_t bytes() const;
};

struct ResponseStoreStats {
  size_t count = 0, bytes = 0, max_count = 0, max_bytes = 0;
  uint64_t hits = 0, misses = 0, evictions = 0;  // follow-ups that found / did not find theirs; LRU evictions
};

class ResponseStore {
 public:
  // Both bounds at least 1.
  ResponseStore(size_t max_count, size_t max_bytes);

  // Stores it, the most recently used; evicts the least recently used past
  // a bound. False (nothing stored or evicted) when it alone passes the
  // byte budget.
  bool put(const std::string& id, std::shared_ptr<const StoredResponse> r);
  // The response, made the most recently used; null if absent. follow_up:
  // counted as a hit or a miss.
  std::shared_ptr<const StoredResponse> get(const std::string& id, bool follow_up);
  // False if absent.
  bool erase(const std::string& id);
  ResponseStoreStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> response;
    size_t bytes;
    std::list<std::string>::iterator at;
  };
  void drop(std::unordered_map<std::string, Entry>::iterator it);

  mutable std::mutex m_;
  std::list<std::string> lru_;  // most recently used first
  std::unordered_map<std::string, Entry> entries_;
  ResponseStoreStats stats_;
};

}  // namespace tps
