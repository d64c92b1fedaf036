// The exchange between ranks, on 1-4 ranks of one host: sums of fixed-point
// partials over both transports (exact: the same bits on every rank, from
// either transport, and as one rank adding them), and the small collectives.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/exchange.h"
#include "tests/mpi_test_env.h"

namespace tps {
namespace {

using testing::mpi;

// Values every rank can compute for any rank: partial r, element i, of
// either sign and up to 2^60 in magnitude (sums of several wrap around in
// between and still come out right).
int64_t part(int r, size_t i) {
  return static_cast<int64_t>(std::sin(0.37 * static_cast<double>(i) + r) * 0x1p60) + static_cast<int64_t>(i) * r;
}

TEST(Exchange, SumsExactlyOverBothTransports) {
  const int R = mpi().size();
  // Longer than the shared slot (1000 values), so sums go in pieces too.
  const size_t n = 2880 * 3 + 5;
  std::vector<int64_t> want(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t s = 0;
    for (int r = R - 1; r >= 0; --r) s += static_cast<uint64_t>(part(r, i));  // any order: exact
    want[i] = static_cast<int64_t>(s);
  }
  for (const char* how : {"shm", "mpi", "auto"}) {
    SCOPED_TRACE(how);
    Exchange ex(mpi(), how, 1000);
    EXPECT_EQ(ex.transport(), R == 1 ? Transport::solo : std::string(how) == "mpi" ? Transport::mpi : Transport::shm);
    for (int round = 0; round < 3; ++round) {  // the slots alternate
      std::vector<int64_t> x(n);
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
