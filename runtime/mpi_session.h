// The MPI layer: init/finalize as an object, the world and node-local
// communicators, and the rule that a failure on any rank ends every rank.
//
// Only runtime/ includes <mpi.h>; the rest of tps sees ranks as numbers and
// exchanges data through runtime's functions.
#pragma once

#include <mpi.h>

#include <cstdint>
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
  // Rank 0's text on every rank (what the others pass is ignored). Collective.
  std::string broadcast_from_root(const std::string& text) const;
  // Whether every rank on this host passed the text its local rank 0 passed;
  // the same answer (every host's, together) on every rank. Collective.
  bool same_on_host(const std::string& text) const;
  // The least of every rank's value, on every rank. Collective.
  int64_t min_over_ranks(int64_t value) const;

  // Ends the job after a failure on this rank, saying it once. The rank
  // tells every other rank (a notice on a communicator of its own) and
  // listens for theirs while they keep coming, kQuietSeconds after the
  // last (kAgreeSeconds at most). When every rank has failed (bad input all
  // of them see), rank 0 alone prints "TOOL: message" and every rank exits
  // with its code through MPI_Finalize: no abort notice (mpirun -q silences
  // its own remark on the exit code). Otherwise the lowest failing rank
  // prints "TOOL: rank R on HOST: message" and ends every rank with
  // MPI_Abort -- a failure the others do not share ends the job within
  // kQuietSeconds, not after the others had every chance to fail too. One
  // rank alone prints "TOOL: message" and exits. TOOL is log_tool(). Never
  // returns.
  [[noreturn]] void end_job(const std::string& message, int exit_code) const;
  static constexpr double kQuietSeconds = 0.25, kAgreeSeconds = 2.0;

 private:
  void finalize() const;  // MPI_Finalize, with this rank's segment name back for it
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, host_count_ = 1;
  std::vector<std::string> own_segments_;  // Open MPI's shared-memory files this rank made (mpi_session.cpp)
  std::string host_;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  MPI_Comm failure_comm_ = MPI_COMM_NULL;  // a world of its own, for end_job's notices
};

// The rank a launcher (mpirun, srun) gave this process, read from its
// environment before MPI starts; 0 when started alone. So that what every
// rank would say before MPI_Init (a usage error) is said by rank 0 only.
int launcher_rank();

// The MPI library's own description of itself (its first line), as
// MPI_Get_library_version gives it; callable before MPI starts.
std::string mpi_library_version();

// Runs body on every rank inside an MpiSession. An exception escaping body on
// any rank, or a non-zero return, ends all ranks promptly (end_job) with
// that rank's message: a failing rank never leaves the others waiting in a
// collective. Returns body's result (0) when every rank succeeds.
int run_on_all_ranks(int argc, char** argv, const std::function<int(MpiSession&)>& body);

}  // namespace tps
