// The key of a KV block in the prefix cache: a 64-bit hash of the block's
// tokens chained to its predecessor's key, so a key names a whole prefix
// (block 0 to this one). Two prefixes share a key only by a hash collision,
// about n^2 / 2^65 for n cached blocks: with a million blocks, 3e-8.
#pragma once

#include <cstdint>
#include <span>

namespace tps {

inline uint64_t prefix_key(uint64_t previous, std::span<const int32_t> tokens) {
  uint64_t h = previous ^ 0x9E3779B97F4A7C15ull;
  for (int32_t t : tokens) {  // splitmix64's finalizer over each token
    h += static_cast<uint32_t>(t) + 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace tps
