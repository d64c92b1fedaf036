#include "engine/cache/tier_index.h"

#include <algorithm>

namespace tps {

TierIndex::TierIndex(int full_slots, int sliding_slots) {
  for (int k = 0; k < 2; ++k) {
    const int n = k == 0 ? full_slots : sliding_slots;
    key_[k].assign(n, 0);
    at_[k].assign(n, lru_[k].end());
    for (int slot = n - 1; slot >= 0; --slot) free_[k].push_back(slot);
  }
}

int TierIndex::find(BlockKind k, uint64_t key) const {
  auto it = by_key_[int(k)].find(key);
  return it == by_key_[int(k)].end() ? -1 : it->second;
}

void TierIndex::touch(BlockKind kind, int slot) {
  const int k = int(kind);
  lru_[k].splice(lru_[k].end(), lru_[k], at_[k][slot]);
}

bool TierIndex::pinned(int k, int slot) const {
  return std::find(pinned_[k].begin(), pinned_[k].end(), slot) != pinned_[k].end();
}

int TierIndex::place(BlockKind kind, uint64_t key) {
  const int k = int(kind);
  if (const int slot = find(kind, key); slot >= 0) {
    touch(kind, slot);
    return -1;
  }
  int slot = -1;
  if (!free_[k].empty()) {
    slot = free_[k].back();
    free_[k].pop_back();
  } else {
    auto victim = std::find_if(lru_[k].begin(), lru_[k].end(), [&](int s) { return !pinned(k, s); });
    if (victim == lru_[k].end()) return -1;
    slot = *victim;
    lru_[k].erase(victim);
    by_key_[k].erase(key_[k][slot]);
    ++evictions_;
  }
  key_[k][slot] = key;
  by_key_[k].emplace(key, slot);
  at_[k][slot] = lru_[k].insert(lru_[k].end(), slot);
  return slot;
}

bool TierIndex::adopt(BlockKind kind, int slot, uint64_t key) {
  const int k = int(kind);
  auto free = std::find(free_[k].begin(), free_[k].end(), slot);
  if (free == free_[k].end() || find(kind, key) >= 0) return false;
  free_[k].erase(free);
  key_[k][slot] = key;
  by_key_[k].emplace(key, slot);
  at_[k][slot] = lru_[k].insert(lru_[k].end(), slot);
  return true;
}

}  // namespace tps
