// The MPI layer: init/finalize as an object, the world and node-local
// communicators, and the rule that a failure on any rank ends every rank.
//
// Only runtime/ includes <mpi.h>; the rest of tps sees ranks as numbers and
// exchanges data through runtime's functions.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

namespace tps {

class MpiSession {
 public:
  // Initialises MPI (threads: funneled -- only the main thread calls MPI) and
  // splits the world into node-local communicators (ranks that share memory).
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank and count among the ranks on this host (the shared-memory split).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Number of distinct hosts in the job.
  int host_count() const { return host_count_; }
  const std::string& host() const { return host_; }

  MPI_Comm world() const { return MPI_COMM_WORLD; }
  MPI_Comm node() const { return node_comm_; }

  // Collects one string from every rank on rank 0, in rank order (other
  // ranks get an empty vector). Collective.
  std::vector<std::string> gather_to_root(const std::string& text) const;

  // Prints "TOOL: rank R on HOST: message" to stderr ("TOOL: message" for a
  // job of one rank, which then exits with nothing after it; TOOL is
  // log_tool()) and ends every
  // rank of the job with exit_code. Never returns.
  [[noreturn]] void abort(const std::string& message, int exit_code) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, host_count_ = 1;
  std::string host_;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
};

// The MPI library's own description of itself (its first line), as
// MPI_Get_library_version gives it; callable before MPI starts.
std::string mpi_library_version();

// Runs body on every rank inside an MpiSession. An exception escaping body on
// any rank, or a non-zero return, ends all ranks promptly (MPI_Abort) with that
// rank's message: a failing rank never leaves the others waiting in a
// collective. Returns body's result (0) when every rank succeeds.
int run_on_all_ranks(int argc, char** argv, const std::function<int(MpiSession&)>& body);

}  // namespace tps
