// runtime/hash.h against the published test vectors: seeds must give the
// same bits everywhere (the sampler's draws, the synthetic models' weights).
#include <gtest/gtest.h>

#include "runtime/hash.h"

namespace tps {
namespace {

TEST(Hash, Splitmix64FromZeroGivesTheReferenceSequence) {
  uint64_t state = 0;
  EXPECT_EQ(splitmix64(state), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(state), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64(state), 0x06c45d188009454full);
}

TEST(Hash, Fnv1aGivesTheReferenceValues) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace tps
