// Latency of the activation exchange: the sum across ranks that every split
// layer does twice (gpt-oss-20b: 2,880 fixed-point values, the hidden state
// of one token), for each transport of runtime/exchange.h (shm: the MPI-3
// shared memory window; mpi: MPI_Allgather and an ordered sum), and
// MPI_Allreduce of the same int64 values for comparison. Also 64 values (the
// tiny model's hidden state) and 23,040 (a prefill batch of 8 tokens). Each result is checked once before it
// is timed; a wrong sum ends the benchmark with an error.
//
// Every rank runs the same fixed number of iterations (collectives must
// match across ranks, so Google Benchmark may not pick counts per rank);
// rank 0's wall time per call is reported, and only rank 0 prints.
//   mpirun -np 2 build/bin/bench_exchange [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/exchange.h"
#include "runtime/mpi_session.h"

namespace {

using namespace tps;

constexpr int kValues[] = {64, 2880, 23040};
constexpr int kIterations = 2000;
constexpr int kRepetitions = 5;

// Fills data with (rank + 1) x 2^40 + i, so the expected sum is known.
void fill(std::vector<int64_t>& data, int rank) {
  for (size_t i = 0; i < data.size(); ++i) data[i] = (int64_t{rank} + 1) * (int64_t{1} << 40) + static_cast<int64_t>(i);
}

bool check(const std::vector<int64_t>& data, int ranks) {
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != int64_t{ranks} * (ranks + 1) / 2 * (int64_t{1} << 40) + ranks * static_cast<int64_t>(i))
      return false;
  return true;
}

template <typename Sum>
void bm_sum(benchmark::State& state, int ranks, int rank, Sum sum) {
  std::vector<int64_t> data(state.range(0));
  fill(data, rank);
  sum(data);
  if (!check(data, ranks)) {
    state.SkipWithError("wrong sum");
    return;
  }
  std::fill(data.begin(), data.end(), 0);  // timed sums of zeros stay zeros
  for (auto _ : state) {
    sum(data);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(data.size() * sizeof(int64_t)) * state.iterations());
}

// Other ranks run the benchmarks but print and write nothing.
class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  return run_on_all_ranks(argc, argv, [&](MpiSession& mpi) {
    // With --benchmark_out, Google Benchmark wants a file reporter too; the
    // other ranks then get a silent one (without, it refuses one).
    bool writes_file = false;
    for (int i = 1; i < argc; ++i) writes_file |= std::string(argv[i]).starts_with("--benchmark_out=");
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    if (mpi.size() < 2) throw InputError("bench_exchange: run it on 2 or more ranks (mpirun -np 2 bench_exchange)");
    const int ranks = mpi.size(), rank = mpi.rank();
    Exchange shm(mpi, "shm", kValues[std::size(kValues) - 1]);
    Exchange over_mpi(mpi, "mpi", kValues[std::size(kValues) - 1]);
    auto add = [&](const std::string& what, auto sum) {
      auto* b = benchmark::RegisterBenchmark(cat("allreduce/", what, "/ranks:", ranks).c_str(),
                                             [=](benchmark::State& state) { bm_sum(state, ranks, rank, sum); });
      for (int n : kValues) b->Arg(n);
      b->ArgName("values")
          ->Iterations(kIterations)
          ->Repetitions(kRepetitions)
          ->ReportAggregatesOnly(true)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    };
    add("exchange_shm", [&](std::vector<int64_t>& d) { shm.sum(d.data(), d.size()); });
    add("exchange_mpi", [&](std::vector<int64_t>& d) { over_mpi.sum(d.data(), d.size()); });
    add("MPI_Allreduce", [&](std::vector<int64_t>& d) {
      MPI_Allreduce(MPI_IN_PLACE, d.data(), static_cast<int>(d.size()), MPI_INT64_T, MPI_SUM, mpi.world());
    });
    Silent silent;
    if (rank == 0)
      benchmark::RunSpecifiedBenchmarks();
    else
      benchmark::RunSpecifiedBenchmarks(&silent, writes_file ? &silent : nullptr);
    benchmark::Shutdown();
    return 0;
  });
}
