// A hash table of fixed capacity in one array (open addressing, linear
// probing): the tokenizer's maps of 200k tokens and 450k merges, built at
// every start. std::unordered_map allocates a node per entry, which made
// them half of a tpsrun start (0.4 s for o200k); this allocates once, in the
// constructor, so a failed allocation leaves nothing half-built either.
//
// Keys: std::string_view (hashed with XXH3; the table keeps the view, not
// the bytes) or uint64_t (a splitmix64 finalizer). No erase, no growth: the
// capacity is the most keys the table will hold.
#pragma once

#include <xxhash.h>

#include <bit>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tps {

inline uint64_t flat_hash(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }
inline uint64_t flat_hash(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class Key, class Value>
class FlatTable {
 public:
  // At most half full: probes stay short.
  explicit FlatTable(size_t capacity)
      : slots_(std::bit_ceil(2 * capacity + 2)), mask_(slots_.size() - 1), capacity_(capacity) {}

  // Adds key -> value unless the key is there; false if it was, or if the
  // table holds `capacity` keys already.
  bool insert(Key key, Value value) {
    if (size_ == capacity_) return false;
    Slot& s = slots_[place(key)];
    if (s.used) return false;
    s = {key, value, true};
    ++size_;
    return true;
  }
  const Value* find(Key key) const {
    const Slot& s = slots_[place(key)];
    return s.used ? &s.value : nullptr;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };
  // The key's slot, or the empty one where it would go (there is one: the
  // table is never full).
  size_t place(Key key) const {
    size_t i = flat_hash(key) & mask_;
    while (slots_[i].used && slots_[i].key != key) i = (i + 1) & mask_;
    return i;
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, capacity_ = 0, size_ = 0;
};

}  // namespace tps
