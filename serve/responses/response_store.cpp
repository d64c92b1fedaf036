#include "serve/responses/response_store.h"

#include <algorithm>

namespace tps {

size_t StoredResponse::bytes() const {
  size_t n = sizeof(*this) + response.dump().size() + input_items.dump().size() + item_instructions.size();
  for (const MessageIds& m : messages) n += sizeof(m) + m.ids.size() * sizeof(int32_t);
  for (const auto& [id, name] : calls) n += 64 + id.size() + name.size();  // a map node's overhead, roughly
  return n;
}

ResponseStore::ResponseStore(size_t max_count, size_t max_bytes) {
  stats_.max_count = std::max<size_t>(1, max_count), stats_.max_bytes = std::max<size_t>(1, max_bytes);
}

void ResponseStore::drop(std::unordered_map<std::string, Entry>::iterator it) {
  stats_.bytes -= it->second.bytes;
  lru_.erase(it->second.at);
  entries_.erase(it);
}

void ResponseStore::begin(const std::string& id, const std::string& owner, std::function<void()> cancel) {
  std::lock_guard<std::mutex> lock(m_);
  generating_[id] = {owner, std::move(cancel)};
}

bool ResponseStore::put(const std::string& id, const std::string& owner, std::shared_ptr<const StoredResponse> r) {
  begin(id, owner, [] {});
  return finish(id, std::move(r));
}

bool ResponseStore::finish(const std::string& id, std::shared_ptr<const StoredResponse> r) {
  const size_t bytes = r ? r->bytes() + id.size() : 0;
  std::lock_guard<std::mutex> lock(m_);
  const auto g = generating_.find(id);
  if (g == generating_.end()) return false;  // deleted while it was generated
  const std::string owner = std::move(g->second.owner);
  generating_.erase(g);
  if (!r || bytes > stats_.max_bytes) return false;
  if (auto it = entries_.find(id); it != entries_.end()) drop(it);
  while (!lru_.empty() && (entries_.size() + 1 > stats_.max_count || stats_.bytes + bytes > stats_.max_bytes)) {
    drop(entries_.find(lru_.back()));
    ++stats_.evictions;
  }
  lru_.push_front(id);
  entries_[id] = {std::move(r), owner, bytes, lru_.begin()};
  stats_.bytes += bytes;
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id, const std::string& owner,
                                                         bool follow_up) {
  std::lock_guard<std::mutex> lock(m_);
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.owner != owner) {
    stats_.misses += follow_up;
    return nullptr;
  }
  stats_.hits += follow_up;
  lru_.splice(lru_.begin(), lru_, it->second.at);
  return it->second.response;
}

bool ResponseStore::erase(const std::string& id, const std::string& owner) {
  std::lock_guard<std::mutex> lock(m_);
  if (const auto g = generating_.find(id); g != generating_.end() && g->second.owner == owner) {
    g->second.cancel();
    generating_.erase(g);
    return true;
  }
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.owner != owner) return false;
  drop(it);
  return true;
}

ResponseStoreStats ResponseStore::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  ResponseStoreStats s = stats_;
  s.count = entries_.size();
  return s;
}

}  // namespace tps
