// The worker pool: every thread runs every job once, shares split a range
// exactly, chunks hand out every item once, exceptions reach the caller, and
// waking is cheap.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <stdexcept>

#include "runtime/thread_pool.h"

namespace tps {
namespace {

TEST(ThreadPool, EveryThreadRunsEveryJob) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    std::vector<std::atomic<int>> hits(n);
    for (int rep = 0; rep < 1000; ++rep)
      pool.run([&](int t, int nt) {
        EXPECT_EQ(nt, n);
        hits[t].fetch_add(1);
      });
    for (int t = 0; t < n; ++t) EXPECT_EQ(hits[t].load(), 1000) << "thread " << t;
  }
}

TEST(ThreadPool, SplitCoversTheRangeExactly) {
  for (int64_t items : {0, 1, 7, 100, 2880}) {
    for (int n : {1, 2, 3, 7}) {
      int64_t next = 0;
      for (int t = 0; t < n; ++t) {
        auto [b, e] = ThreadPool::split(items, t, n);
        EXPECT_EQ(b, next);
        EXPECT_GE(e, b);
        next = e;
      }
      EXPECT_EQ(next, items);
    }
  }
}

TEST(ThreadPool, ChunksShrinkInWholeGrains) {
  for (int64_t items : {0, 1, 15, 16, 17, 1000, 201088}) {
    ThreadPool::Chunks chunks(items, 16, 2);
    int64_t next = 0, last_size = items;
    for (int64_t b, e; chunks.next(b, e);) {
      EXPECT_EQ(b, next);
      ASSERT_GT(e, b);
      if (e < items) {
        EXPECT_EQ((e - b) % 16, 0) << b;  // only the last is cut short
      }
      EXPECT_LE(e - b, std::max<int64_t>(last_size, 16));
      EXPECT_LE(e - b, std::max<int64_t>((items - b) / 4 + 16, 16));  // a quarter of what is left
      last_size = e - b, next = e;
    }
    EXPECT_EQ(next, items);
  }
}

TEST(ThreadPool, ChunksGiveEveryItemToOneThread) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<std::atomic<int>> taken(5000);
    ThreadPool::Chunks chunks(5000, 7, pool.size());
    pool.run([&](int, int) {
      for (int64_t b, e; chunks.next(b, e);)
        for (int64_t i = b; i < e; ++i) taken[i].fetch_add(1);
    });
    for (size_t i = 0; i < taken.size(); ++i) ASSERT_EQ(taken[i].load(), 1) << "item " << i;
  }
}

TEST(ThreadPool, ParallelSumMatches) {
  ThreadPool pool(3);
  std::vector<int64_t> v(100003);
  std::iota(v.begin(), v.end(), 0);
  std::vector<int64_t> partial(3);
  pool.run([&](int t, int n) {
    auto [b, e] = ThreadPool::split(static_cast<int64_t>(v.size()), t, n);
    partial[t] = std::accumulate(v.begin() + b, v.begin() + e, int64_t{0});
  });
  EXPECT_EQ(partial[0] + partial[1] + partial[2], std::accumulate(v.begin(), v.end(), int64_t{0}));
}

TEST(ThreadPool, WorkerExceptionReachesTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([](int t, int) {
    if (t == 1) throw std::runtime_error("worker failed");
  }),
               std::runtime_error);
  int ran = 0;
  pool.run([&](int t, int) {  // the pool still works
    if (t == 0) ++ran;        // (only thread 0 writes: no race)
  });
  EXPECT_EQ(ran, 1);
}

TEST(ThreadPool, OnStartRunsOnEachWorker) {
  std::vector<std::atomic<int>> started(4);
  {
    ThreadPool pool(4, [&](int t) { started[t].fetch_add(1); });
    pool.run([](int, int) {});
  }
  EXPECT_EQ(started[0].load(), 0);  // thread 0 is the caller
  for (int t = 1; t < 4; ++t) EXPECT_EQ(started[t].load(), 1);
}

}  // namespace
}  // namespace tps
