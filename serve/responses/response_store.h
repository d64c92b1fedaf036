// The responses the Responses API stores (`store`, true by default), for
// GET /v1/responses/{id}, its input_items, DELETE, and `previous_response_id`:
// each keeps its response object, its input items, and its conversation as
// token ids (engine/text/conversation_ids.h) so that a follow-up's prompt begins
// with exactly the ids whose KV blocks the prefix cache may still hold. The
// ids outlive the blocks: a follow-up after the pool let them go computes
// them again.
//
// Each belongs to the API key that made it (api_keys.h: "" when the server
// needs none): another key finds nothing there, as if it had never been.
// A response is known from when it starts: deleting one still being
// generated cancels it, and it is never stored.
//
// Bounded by a count and a byte budget (--responses-max, --responses-mib):
// past either, the least recently used response goes. Thread-safe; a
// response is immutable once stored and shared with the requests reading it,
// so concurrent follow-ups to the same response read the same state.
#pragma once

#include <cstdint>
#include <functional>
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

  // A response of owner's begins: until finish(id), erase() calls cancel.
  void begin(const std::string& id, const std::string& owner, std::function<void()> cancel);
  // Its generation ended: stores r (null: nothing to store), the most
  // recently used, evicting the least recently used past a bound. False
  // (nothing stored or evicted) when it was deleted meanwhile or alone
  // passes the byte budget.
  bool finish(const std::string& id, std::shared_ptr<const StoredResponse> r);
  // begin() and finish() at once.
  bool put(const std::string& id, const std::string& owner, std::shared_ptr<const StoredResponse> r);
  // Owner's response, made the most recently used; null if absent (or
  // another's). follow_up: counted as a hit or a miss.
  std::shared_ptr<const StoredResponse> get(const std::string& id, const std::string& owner, bool follow_up);
  // Owner's response deleted, or cancelled if it is being generated. False
  // if absent (or another's).
  bool erase(const std::string& id, const std::string& owner);
  ResponseStoreStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> response;
    std::string owner;
    size_t bytes;
    std::list<std::string>::iterator at;
  };
  struct Generating {
    std::string owner;
    std::function<void()> cancel;
  };
  void drop(std::unordered_map<std::string, Entry>::iterator it);

  mutable std::mutex m_;
  std::list<std::string> lru_;  // most recently used first
  std::unordered_map<std::string, Entry> entries_;
  std::unordered_map<std::string, Generating> generating_;
  ResponseStoreStats stats_;
};

}  // namespace tps
