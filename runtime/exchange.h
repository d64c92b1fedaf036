// How the ranks of one job exchange activations: the sums of partial results
// that split layers need (twice per layer), the small collectives of sampling,
// and the point-to-point hand-off of a pipeline.
//
// The sums are of fixed-point partials (int64, kernels/matmul.h's split-
// invariant products), added exactly: every rank gets the same bits, which
// are the bits one rank computing the whole sum gets, over either of two
// transports:
//   shm -- an MPI-3 shared-memory window on the node: each rank writes its
//          partial into its own slot, raises a flag, and reads the others';
//          one flag wait per sum, no copies through MPI. All ranks must share
//          one host.
//   mpi -- MPI_Allgather of the partials, then the same ordered sum: works
//          across hosts, over whatever MPI transport is configured.
// docs/PERFORMANCE.md has the latency of each (bench/bench_exchange).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tps {

class MpiSession;

enum class Transport { solo, shm, mpi };
const char* transport_name(Transport t);

class Exchange {
 public:
  // One rank alone: sums are no-ops, nothing touches MPI.
  Exchange();
  // Over the job's world communicator. want: "auto" (shm when every rank is on
  // this host, mpi otherwise), "shm" (InputError if the ranks span hosts) or
  // "mpi". max_values bounds the slot of a shared-memory sum (longer sums go
  // in pieces). Collective.
  Exchange(const MpiSession& mpi, const std::string& want, size_t max_values);
  // The bytes of shared memory each rank adds to the window for max_values
  // (an upper bound: an mpi exchange allocates as it goes).
  static uint64_t window_bytes(size_t max_values);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Transport transport() const { return transport_; }

  // data[i] = sum over ranks of their data[i], in two's complement.
  void sum(int64_t* data, size_t n);
  // all[r * bytes ...] = rank r's `bytes` bytes at mine.
  void all_gather(const void* mine, void* all, size_t bytes);
  void broadcast(void* data, size_t bytes, int root);
  // Root's list of plain items on every rank: its count, then its bytes.
  template <typename T>
  void broadcast_vector(std::vector<T>& items, int root) {
    static_assert(std::is_trivially_copyable_v<T>, "items travel as bytes");
    uint64_t n = items.size();
    broadcast(&n, sizeof n, root);
    items.resize(n);
    if (n) broadcast(items.data(), n * sizeof(T), root);
  }
  void send(const void* data, size_t bytes, int to);
  void recv(void* data, size_t bytes, int from);
  // A receive posted now and finished by wait_recv: a rank that may be busy
  // sending when a message for it comes (a pipeline's first rank, sending the
  // next step while the last one sends back the tokens of the one before)
  // posts it first, so neither waits for the other. Up to max_bytes; returns
  // a handle for wait_recv, which returns the bytes that came.
  int post_recv(void* data, size_t max_bytes, int from);
  size_t wait_recv(int handle);
  void barrier();

  // Time spent inside the calls above (waiting for other ranks included) and
  // bytes this rank contributed (what tpsrun --json reports per decode step).
  struct Stats {
    uint64_t calls = 0, bytes = 0;
    double seconds = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
  Transport transport_ = Transport::solo;
  Stats stats_;
};

}  // namespace tps
