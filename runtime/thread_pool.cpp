#include "runtime/thread_pool.h"

#include <immintrin.h>

#include <system_error>
#include <utility>

#include "runtime/error.h"

namespace tps {
namespace {
// Spin iterations before sleeping: ~50-100 us of _mm_pause on current x86,
// longer than the gap between two operations of a forward pass.
constexpr int kSpins = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads, const std::function<void(int)>& on_start) : n_(n_threads < 1 ? 1 : n_threads) {
  try {
    for (int i = 1; i < n_; ++i) threads_.emplace_back(&ThreadPool::worker, this, i, on_start);
  } catch (const std::system_error& e) {
    const size_t started = threads_.size() + 1;
    stop_workers();
    throw Error(cat("cannot start ", n_, " threads (the system gave ", started, "): ", e.what()));
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index, std::function<void(int)> on_start) {
  if (on_start) on_start(index);
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int s = 0; g == seen && s < kSpins; ++s) {
      _mm_pause();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = g;
    if (stop_.load()) return;
    try {
      (*job_)(index, n_);
    } catch (...) {
      if (!failed_.exchange(true)) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& job) {
  if (n_ == 1) {
    job(0, 1);
    return;
  }
  job_ = &job;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  std::exception_ptr mine;
  try {
    job(0, n_);
  } catch (...) {
    mine = std::current_exception();
  }
  while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
  if (mine) std::rethrow_exception(mine);
  if (failed_.exchange(false)) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace tps
