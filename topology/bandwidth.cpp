#include "topology/bandwidth.h"

#include <algorithm>
#include <barrier>
#include <thread>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "topology/binding.h"

namespace tps {
namespace {

struct Worker {
  int pu = 0;    // OS index the thread runs on
  int node = 0;  // OS index of the node its arrays live on
  size_t n = 0;  // doubles per array
};

uint64_t default_array_bytes(const Machine& m, int node) {
  std::vector<int> groups;
  uint64_t l3 = 0;
  for (int c : m.numa_nodes[node].cores) {
    const Core& core = m.cores[c];
    if (std::find(groups.begin(), groups.end(), core.l3_group) == groups.end()) {
      groups.push_back(core.l3_group);
      l3 += core.l3_bytes;
    }
  }
  return std::clamp<uint64_t>(4 * l3, 256ull << 20, 1ull << 30);
}

// Runs the triad on every worker at once, repetitions times; returns the
// seconds of each repetition (from a common start to the last finisher).
std::vector<double> run_triad(const std::vector<Worker>& workers, int repetitions) {
  int n = static_cast<int>(workers.size());
  std::barrier sync(n + 1);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      const Worker& w = workers[t];
      double *a = nullptr, *b = nullptr, *c = nullptr;
      size_t bytes = w.n * sizeof(double);
      try {
        bind_this_thread({w.pu});
        a = static_cast<double*>(alloc_on_node(bytes, w.node));
        b = static_cast<double*>(alloc_on_node(bytes, w.node));
        c = static_cast<double*>(alloc_on_node(bytes, w.node));
      } catch (const Error& e) {
        errors[t] = e.what();
      }
      bool ok = errors[t].empty();
      if (ok)  // first touch by the thread that will stream the arrays
        for (size_t i = 0; i < w.n; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
      sync.arrive_and_wait();  // setup done
      for (int r = 0; r < repetitions; ++r) {
        sync.arrive_and_wait();  // start
        if (ok) {
          const double s = 3.0;
          for (size_t i = 0; i < w.n; ++i) a[i] = b[i] + s * c[i];
        }
        sync.arrive_and_wait();  // end
      }
      free_on_node(a, bytes);
      free_on_node(b, bytes);
      free_on_node(c, bytes);
    });
  }
  sync.arrive_and_wait();
  std::vector<double> seconds;
  for (int r = 0; r < repetitions; ++r) {
    sync.arrive_and_wait();
    const Clock::time_point t0 = Clock::now();
    sync.arrive_and_wait();
    seconds.push_back(seconds_since(t0));
  }
  for (auto& th : threads) th.join();
  for (const std::string& e : errors)
    if (!e.empty()) throw Error("bandwidth: " + e);
  return seconds;
}

BandwidthResult measure(const Machine& m, const std::vector<int>& nodes, uint64_t array_bytes, int repetitions) {
  BandwidthResult r;
  r.nodes = nodes;
  r.scope = nodes.size() == 1 ? cat("node ", m.numa_nodes[nodes[0]].os_index) : "all nodes";
  std::vector<Worker> workers;
  for (int node : nodes) {
    std::vector<int> cores;
    for (int c : m.numa_nodes[node].cores)
      if (m.core_is_usable(c)) cores.push_back(c);
    uint64_t bytes = array_bytes ? array_bytes : default_array_bytes(m, node);
    r.array_bytes += bytes;
    for (int c : cores) {
      int pu = -1;
      for (int p : m.cores[c].pus)
        if (std::binary_search(m.available_pus.begin(), m.available_pus.end(), p)) {
          pu = p;
          break;
        }
      workers.push_back(Worker{pu, m.numa_nodes[node].os_index, bytes / 8 / cores.size()});
    }
  }
  r.threads = static_cast<int>(workers.size());
  std::vector<double> s = run_triad(workers, repetitions);
  std::sort(s.begin(), s.end());
  double moved = 0;
  for (const Worker& w : workers) moved += 3.0 * 8.0 * static_cast<double>(w.n);
  r.best_gb_per_s = moved / s.front() / 1e9;
  r.median_gb_per_s = moved / s[s.size() / 2] / 1e9;
  return r;
}

}  // namespace

std::vector<BandwidthResult> measure_bandwidth(const Machine& m, uint64_t array_bytes, int repetitions) {
  if (!m.is_this_host)
    throw InputError(
        "--bandwidth measures this host; it cannot be combined with --input or "
        "--synthetic");
  if (repetitions < 1) throw InputError(cat("repetitions: got ", repetitions, ", expected >= 1"));
  std::vector<int> nodes;
  for (const NumaNode& n : m.numa_nodes)
    if (std::any_of(n.cores.begin(), n.cores.end(), [&](int c) { return m.core_is_usable(c); }))
      nodes.push_back(n.index);
  std::vector<BandwidthResult> out;
  for (int node : nodes) out.push_back(measure(m, {node}, array_bytes, repetitions));
  if (nodes.size() > 1) out.push_back(measure(m, nodes, array_bytes, repetitions));
  return out;
}

}  // namespace tps
