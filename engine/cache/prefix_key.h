// The key of a KV block in the prefix cache: a 64-bit hash of the block's
// tokens (XXH3, from Debian's libxxhash) seeded with its predecessor's key,
// so a key names a whole prefix (block 0 to this one). Two prefixes share a
// key only by a hash collision, about n^2 / 2^65 for n cached blocks: with
// a million blocks, 3e-8. Keys live only in a running process.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <span>

namespace tps {

inline uint64_t prefix_key(uint64_t previous, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), previous);
}

}  // namespace tps
