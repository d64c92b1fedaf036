#include "engine/cache/block_manager.h"

#include "runtime/error.h"

namespace tps {

BlockManager::BlockManager(int full_blocks, int sliding_blocks, int max_kept_full, int max_kept_sliding) {
  max_kept_[0] = max_kept_full, max_kept_[1] = max_kept_sliding;
  for (int k = 0; k < 2; ++k) {
    const int n = k == 0 ? full_blocks : sliding_blocks;
    refs_[k].assign(n, 0);
    key_[k].assign(n, 0), keyed_[k].assign(n, 0);
    kept_[k].assign(n, 0), kept_stamp_[k].assign(n, 0), idle_in_[k].assign(n, 0);
    idle_at_[k].assign(n, idle_[k].end());
    for (int id = n - 1; id >= 0; --id) free_[k].push_back(id);
  }
}

int BlockManager::available(BlockKind k) const { return static_cast<int>(free_[int(k)].size()) + cached_idle(k); }

bool BlockManager::promise(BlockKind k, int n) {
  if (n > unpromised(k)) return false;
  promised_[int(k)] += n;
  return true;
}

void BlockManager::unpromise(BlockKind k, int n) { promised_[int(k)] -= n; }

int BlockManager::allocate(BlockKind kind) {
  const int k = int(kind);
  int id;
  evicted_ = false;
  if (!free_[k].empty()) {
    id = free_[k].back();
    free_[k].pop_back();
  } else if (!idle_[k].empty() || !kept_idle_[k].empty()) {
    std::list<int>& from = idle_[k].empty() ? kept_idle_[k] : idle_[k];  // kept ones last
    id = from.front();                                                   // evicted: its prefix leaves the cache
    from.pop_front();
    idle_in_[k][id] = 0;
    if (kept_[k][id]) kept_[k][id] = 0, --kept_count_[k];
    by_key_[k].erase(key_[k][id]);
    keyed_[k][id] = 0;
    evicted_ = true, evicted_key_ = key_[k][id];
  } else {
    throw Error(cat("the KV pool has no ", kind == BlockKind::full ? "full" : "sliding",
                    "-attention block left (a promise was broken)"));
  }
  --promised_[k];
  refs_[k][id] = 1;
  return id;
}

void BlockManager::hold(BlockKind kind, int id) {
  const int k = int(kind);
  if (refs_[k][id]++ == 0 && idle_in_[k][id]) {
    (idle_in_[k][id] == 2 ? kept_idle_[k] : idle_[k]).erase(idle_at_[k][id]);
    idle_in_[k][id] = 0;
  }
}

void BlockManager::release(BlockKind kind, int id) {
  const int k = int(kind);
  if (--refs_[k][id] > 0) return;
  if (keyed_[k][id]) {
    std::list<int>& to = kept_[k][id] ? kept_idle_[k] : idle_[k];
    idle_at_[k][id] = to.insert(to.end(), id);
    idle_in_[k][id] = kept_[k][id] ? 2 : 1;
  } else {
    free_[k].push_back(id);
  }
}

int BlockManager::find(BlockKind k, uint64_t key) const {
  auto it = by_key_[int(k)].find(key);
  return it == by_key_[int(k)].end() ? -1 : it->second;
}

void BlockManager::keep(BlockKind kind, int id) {
  const int k = int(kind);
  if (!keyed_[k][id] || max_kept_[k] == 0) return;
  if (!kept_[k][id]) {
    if (idle_in_[k][id] == 1) {  // idle: to the kept ones, as the most recently released
      idle_[k].erase(idle_at_[k][id]);
      idle_at_[k][id] = kept_idle_[k].insert(kept_idle_[k].end(), id);
      idle_in_[k][id] = 2;
    }
    kept_[k][id] = 1, ++kept_count_[k];
  }
  kept_order_[k].emplace_back(id, ++kept_stamp_[k][id]);
  if (kept_order_[k].size() > 2 * static_cast<size_t>(max_kept_[k]) + 64)  // stale marks out
    kept_order_[k].remove_if(
        [&](const std::pair<int, uint32_t>& m) { return !kept_[k][m.first] || kept_stamp_[k][m.first] != m.second; });
  // Past the bound, the oldest marks go: those blocks are evicted like any.
  while (kept_count_[k] > max_kept_[k]) {
    const auto [old, stamp] = kept_order_[k].front();
    kept_order_[k].pop_front();
    if (!kept_[k][old] || kept_stamp_[k][old] != stamp) continue;  // evicted, or marked again since
    kept_[k][old] = 0, --kept_count_[k];
    if (idle_in_[k][old] == 2) {
      kept_idle_[k].erase(idle_at_[k][old]);
      idle_at_[k][old] = idle_[k].insert(idle_[k].begin(), old);  // next out
      idle_in_[k][old] = 1;
    }
  }
}

void BlockManager::cache(BlockKind kind, int id, uint64_t key) {
  const int k = int(kind);
  if (keyed_[k][id] || by_key_[k].count(key)) return;
  by_key_[k].emplace(key, id);
  key_[k][id] = key, keyed_[k][id] = 1;
}

}  // namespace tps
