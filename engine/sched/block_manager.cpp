#include "engine/sched/block_manager.h"

#include "runtime/error.h"

namespace tps {

BlockManager::BlockManager(int full_blocks, int sliding_blocks) {
  for (int k = 0; k < 2; ++k) {
    const int n = k == 0 ? full_blocks : sliding_blocks;
    refs_[k].assign(n, 0);
    key_[k].assign(n, 0), keyed_[k].assign(n, 0);
    idle_at_[k].assign(n, idle_[k].end());
    for (int id = n - 1; id >= 0; --id) free_[k].push_back(id);
  }
}

int BlockManager::available(BlockKind k) const { return static_cast<int>(free_[int(k)].size() + idle_[int(k)].size()); }

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
  } else if (!idle_[k].empty()) {
    id = idle_[k].front();  // evicted: its prefix leaves the cache
    idle_[k].pop_front();
    idle_at_[k][id] = idle_[k].end();
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
  if (refs_[k][id]++ == 0 && idle_at_[k][id] != idle_[k].end()) {
    idle_[k].erase(idle_at_[k][id]);
    idle_at_[k][id] = idle_[k].end();
  }
}

void BlockManager::release(BlockKind kind, int id) {
  const int k = int(kind);
  if (--refs_[k][id] > 0) return;
  if (keyed_[k][id])
    idle_at_[k][id] = idle_[k].insert(idle_[k].end(), id);
  else
    free_[k].push_back(id);
}

int BlockManager::find(BlockKind k, uint64_t key) const {
  auto it = by_key_[int(k)].find(key);
  return it == by_key_[int(k)].end() ? -1 : it->second;
}

void BlockManager::cache(BlockKind kind, int id, uint64_t key) {
  const int k = int(kind);
  if (keyed_[k][id] || by_key_[k].count(key)) return;
  by_key_[k].emplace(key, id);
  key_[k][id] = key, keyed_[k][id] = 1;
}

}  // namespace tps
