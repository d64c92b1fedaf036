// The small hashes the deterministic parts of tps are made of, each in one
// place: splitmix64 (a 64-bit generator: the sampler's draws, the synthetic
// models' weights) and FNV-1a (a seed from a name). Both are fixed by their
// definitions, so a seed gives the same bits on every platform and build.
// (The prefix cache's keys use xxHash: engine/cache/prefix_key.h.)
#pragma once

#include <cstdint>
#include <string_view>

namespace tps {

// The next value of Steele, Lea and Flood's splitmix64 from `state`.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 64-bit FNV-1a of the bytes of s.
inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace tps
