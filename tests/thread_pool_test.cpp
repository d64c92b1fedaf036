// The worker pool: every thread runs every job once, shares split a range
// exactly, exceptions reach the caller, and waking is cheap.
#include <gtest/gtest.h>

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
  pool.run([&](int t, int) { ran += t == 0; });  // the pool still works
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
