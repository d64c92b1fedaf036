// A rank's worker threads: created once, pinned once, then woken for every
// operation of the forward pass. The caller is thread 0, so a pool of n
// threads starts n - 1 workers.
//
// Waking must cost far less than one matrix-vector product (a decode step of
// gpt-oss-20b runs ~100 operations in ~30 ms), so workers spin on a
// generation counter for a while after each job and only then sleep in the
// kernel (C++20 atomic wait, a futex on Linux).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tps {

class ThreadPool {
 public:
  // on_start(thread_index) runs first on each worker (e.g. to pin it); the
  // caller pins thread 0 itself.
  explicit ThreadPool(int n_threads, const std::function<void(int)>& on_start = nullptr);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  // Runs job(thread_index, n_threads) on every thread and returns when all
  // have finished. Not reentrant; call from thread 0 only. An exception in a
  // worker's job is rethrown here.
  void run(const std::function<void(int, int)>& job);

  // [begin, end) of thread t's share of n items, in contiguous chunks.
  static std::pair<int64_t, int64_t> split(int64_t n, int t, int n_threads) {
    return {n * t / n_threads, n * (t + 1) / n_threads};
  }

  // Items [0, n) handed out in chunks to whichever thread of a job asks
  // next, so that a core slowed by its neighbours takes less, where a fixed
  // split would make every thread wait for the slowest. Chunks are guided:
  // each is a share of what is left (a long stream for the prefetchers),
  // shrinking to `grain` items at the end. What a chunk computes must not
  // depend on which thread takes it.
  class Chunks {
   public:
    Chunks(int64_t n, int64_t grain, int n_threads)
        : n_(n), grain_(grain < 1 ? 1 : grain), parts_(2 * static_cast<int64_t>(n_threads)) {}
    // The next chunk [begin, end); false when all are taken.
    bool next(int64_t& begin, int64_t& end) {
      begin = next_.load(std::memory_order_relaxed);
      do {
        if (begin >= n_) return false;
        const int64_t size = ((n_ - begin) / parts_ + grain_ - 1) / grain_ * grain_;
        end = std::min(n_, begin + std::max(size, grain_));
      } while (!next_.compare_exchange_weak(begin, end, std::memory_order_relaxed));
      return true;
    }

   private:
    const int64_t n_, grain_, parts_;
    std::atomic<int64_t> next_{0};
  };

 private:
  void worker(int index, std::function<void(int)> on_start);
  void stop_workers();  // wakes the workers to return, and joins them

  int n_;
  std::vector<std::thread> threads_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};
};

}  // namespace tps
