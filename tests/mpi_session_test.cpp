// The MPI layer on 2, 3 and 4 ranks of one host.
#include <gtest/gtest.h>

#include "tests/mpi_test_env.h"

namespace tps {
namespace {

using testing::mpi;

TEST(MpiSession, RanksAndNodeSplit) {
  EXPECT_GE(mpi().size(), 1);
  EXPECT_LT(mpi().rank(), mpi().size());
  // Every rank of these tests runs on one host: the shared-memory split keeps
  // them together, in world order.
  EXPECT_EQ(mpi().local_size(), mpi().size());
  EXPECT_EQ(mpi().local_rank(), mpi().rank());
  EXPECT_EQ(mpi().host_count(), 1);
  EXPECT_FALSE(mpi().host().empty());
}

TEST(MpiSession, GatherToRootKeepsRankOrder) {
  std::string mine(static_cast<size_t>(mpi().rank()), 'x');  // rank 0 sends nothing
  mine += std::to_string(mpi().rank());
  std::vector<std::string> all = mpi().gather_to_root(mine);
  if (mpi().rank() == 0) {
    ASSERT_EQ(static_cast<int>(all.size()), mpi().size());
    for (int r = 0; r < mpi().size(); ++r)
      EXPECT_EQ(all[r], std::string(static_cast<size_t>(r), 'x') + std::to_string(r));
  } else {
    EXPECT_TRUE(all.empty());
  }
}

TEST(MpiSession, BroadcastFromRootGivesEveryRankRankZerosText) {
  const std::string mine = mpi().rank() == 0 ? std::string("from rank 0\0with a NUL", 22) : std::string(40, 'x');
  EXPECT_EQ(mpi().broadcast_from_root(mine), std::string("from rank 0\0with a NUL", 22));
  EXPECT_EQ(mpi().broadcast_from_root(mpi().rank() == 0 ? "" : "ignored"), "");
}

}  // namespace
}  // namespace tps
