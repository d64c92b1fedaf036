// The exchange between ranks, on 1-4 ranks of one host: sums over both
// transports (the same bits on every rank and from either transport), and
// the small collectives.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/exchange.h"
#include "tests/mpi_test_env.h"

namespace tps {
namespace {

using testing::mpi;

// Values every rank can compute for any rank: partial r, element i.
float part(int r, size_t i) { return std::sin(0.37f * static_cast<float>(i) + r) * (r + 1) * 1e3f; }

TEST(Exchange, SumsInRankOrderOverBothTransports) {
  const int R = mpi().size();
  // Longer than the shared slot (1000 floats), so sums go in pieces too.
  const size_t n = 2880 * 3 + 5;
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) {
    float s = part(0, i);
    for (int r = 1; r < R; ++r) s += part(r, i);
    want[i] = s;
  }
  for (const char* how : {"shm", "mpi", "auto"}) {
    SCOPED_TRACE(how);
    Exchange ex(mpi(), how, 1000);
    EXPECT_EQ(ex.transport(), R == 1 ? Transport::solo : std::string(how) == "mpi" ? Transport::mpi : Transport::shm);
    for (int round = 0; round < 3; ++round) {  // the slots alternate
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = part(mpi().rank(), i);
      ex.sum(x.data(), n);
      EXPECT_EQ(x, want) << "round " << round;
    }
    EXPECT_EQ(ex.stats().calls, R == 1 ? 0u : 3u);
  }
}

TEST(Exchange, GatherBroadcastSendReceive) {
  Exchange ex(mpi(), "auto", 16);
  const int R = ex.size(), me = ex.rank();
  std::vector<int> all(R);
  ex.all_gather(&me, all.data(), sizeof me);
  for (int r = 0; r < R; ++r) EXPECT_EQ(all[r], r);
  double v = me == R - 1 ? 2.5 : 0;
  ex.broadcast(&v, sizeof v, R - 1);
  EXPECT_EQ(v, 2.5);
  if (R > 1) {  // a ring: each rank passes its number on
    int got = -1;
    if (me == 0) {
      ex.send(&me, sizeof me, 1);
      ex.recv(&got, sizeof got, R - 1);
    } else {
      ex.recv(&got, sizeof got, me - 1);
      ex.send(&me, sizeof me, (me + 1) % R);
    }
    EXPECT_EQ(got, (me + R - 1) % R);
  }
  ex.barrier();
}

}  // namespace
}  // namespace tps
