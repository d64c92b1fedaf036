#include "runtime/exchange.h"

#include <immintrin.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <unordered_map>
#include <vector>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/mpi_session.h"

namespace tps {

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::solo: return "solo";
    case Transport::shm: return "shm";
    case Transport::mpi: return "mpi";
  }
  return "?";
}

namespace {

// out[i] = parts[0][i] + parts[1][i] + ... in rank order, in two's
// complement (exact: any order gives the same sum).
void add_in_rank_order(const int64_t* const* parts, int ranks, int64_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t s = static_cast<uint64_t>(parts[0][i]);
    for (int r = 1; r < ranks; ++r) s += static_cast<uint64_t>(parts[r][i]);
    out[i] = static_cast<int64_t>(s);
  }
}

// One rank's part of the shared window: a flag on a cache line of its own,
// then two slots used on alternate sums. A rank writes slot e % 2 for sum e
// only after finishing sum e - 1, which every rank enters only after it has
// read sum e - 2 from that slot: one flag wait per sum is enough.
struct alignas(64) Flag {
  std::atomic<uint64_t> published{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "flags must work across processes");

constexpr size_t kFlagBytes = 64;

void wait_for(const std::atomic<uint64_t>& flag, uint64_t epoch) {
  // Spin briefly (the partner is usually microseconds away), then yield: with
  // more ranks than cores a spinning rank would hold the core its partner needs.
  for (int spins = 0; flag.load(std::memory_order_acquire) < epoch; ++spins) {
    if (spins < 2000)
      _mm_pause();
    else
      sched_yield();
  }
}

}  // namespace

struct Exchange::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  // shm
  MPI_Win window = MPI_WIN_NULL;
  size_t slot_values = 0;
  std::vector<Flag*> flags;           // per rank
  std::vector<int64_t*> slots[2];     // per parity, per rank
  std::vector<const int64_t*> parts;  // scratch: the slots of one sum
  uint64_t epoch = 0;
  // mpi
  std::vector<int64_t> gathered;  // [ranks][n]
  // posted receives, by handle
  std::unordered_map<int, MPI_Request> posted;
  int next_handle = 0;
};

Exchange::Exchange() : impl_(std::make_unique<Impl>()) {}

Exchange::Exchange(const MpiSession& mpi, const std::string& want, size_t max_values)
    : impl_(std::make_unique<Impl>()), rank_(mpi.rank()), size_(mpi.size()) {
  impl_->comm = mpi.world();
  const bool one_host = mpi.host_count() == 1;
  if (want == "auto") {
    transport_ = one_host ? Transport::shm : Transport::mpi;
  } else if (want == "shm") {
    if (!one_host)
      throw InputError(cat("--exchange shm: the ", size_, " ranks run on ", mpi.host_count(),
                           " hosts; shared memory needs them on one (use auto or mpi)"));
    transport_ = Transport::shm;
  } else if (want == "mpi") {
    transport_ = Transport::mpi;
  } else {
    throw InputError(cat("--exchange '", want, "': expected auto, shm or mpi"));
  }
  if (size_ == 1) transport_ = Transport::solo;
  impl_->parts.resize(size_);
  if (transport_ != Transport::shm) return;

  // Every rank allocates its own part (flag + two slots), page-aligned and
  // first touched by itself, so it lies on the rank's own NUMA node.
  Impl& s = *impl_;
  s.slot_values = max_values;
  // Open MPI's window need not start on a cache line (UBSan saw one 8 bytes
  // past): each part starts at its first 64-byte boundary, which every
  // process finds at the same offset (the segment is mapped page-aligned).
  const size_t part = kFlagBytes + 2 * max_values * sizeof(int64_t);
  const MPI_Aint bytes = static_cast<MPI_Aint>(window_bytes(max_values));
  auto line_aligned = [](void* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kFlagBytes - 1) & ~uintptr_t{kFlagBytes - 1});
  };
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* mine = nullptr;
  MPI_Win_allocate_shared(bytes, 1, info, mpi.node(), &mine, &s.window);
  MPI_Info_free(&info);
  uint8_t* own = line_aligned(mine);
  new (own) Flag{};
  std::memset(own + kFlagBytes, 0, part - kFlagBytes);
  MPI_Barrier(mpi.node());
  for (int r = 0; r < size_; ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* base = nullptr;
    MPI_Win_shared_query(s.window, r, &size, &unit, &base);
    uint8_t* p = line_aligned(base);
    s.flags.push_back(reinterpret_cast<Flag*>(p));
    s.slots[0].push_back(reinterpret_cast<int64_t*>(p + kFlagBytes));
    s.slots[1].push_back(reinterpret_cast<int64_t*>(p + kFlagBytes) + max_values);
  }
}

uint64_t Exchange::window_bytes(size_t max_values) { return 2 * kFlagBytes + 2 * max_values * sizeof(int64_t); }

Exchange::~Exchange() {
  // Freeing the window is collective: while an error unwinds this rank, the
  // others may never come, and MPI_Finalize or MPI_Abort will release it.
  if (impl_ && impl_->window != MPI_WIN_NULL && std::uncaught_exceptions() == 0) MPI_Win_free(&impl_->window);
}

namespace {
// Adds the seconds of one call and the bytes it contributed.
class Timed {
 public:
  Timed(Exchange::Stats& s, size_t bytes) : s_(s) {
    ++s.calls;
    s.bytes += bytes;
  }
  ~Timed() { s_.seconds += seconds_since(t0_); }

 private:
  Exchange::Stats& s_;
  Clock::time_point t0_ = Clock::now();
};
}  // namespace

void Exchange::sum(int64_t* data, size_t n) {
  if (transport_ == Transport::solo || n == 0) return;
  Timed timed(stats_, n * sizeof(int64_t));
  Impl& s = *impl_;
  if (transport_ == Transport::mpi) {
    s.gathered.resize(n * size_);
    MPI_Allgather(data, static_cast<int>(n), MPI_INT64_T, s.gathered.data(), static_cast<int>(n), MPI_INT64_T, s.comm);
    for (int r = 0; r < size_; ++r) s.parts[r] = s.gathered.data() + r * n;
    add_in_rank_order(s.parts.data(), size_, data, n);
    return;
  }
  for (size_t done = 0; done < n; done += s.slot_values) {
    const size_t len = std::min(s.slot_values, n - done);
    const uint64_t e = ++s.epoch;
    std::vector<int64_t*>& slot = s.slots[e & 1];
    std::memcpy(slot[rank_], data + done, len * sizeof(int64_t));
    s.flags[rank_]->published.store(e, std::memory_order_release);
    for (int r = 0; r < size_; ++r) {
      wait_for(s.flags[r]->published, e);
      s.parts[r] = slot[r];
    }
    add_in_rank_order(s.parts.data(), size_, data + done, len);
  }
}

void Exchange::all_gather(const void* mine, void* all, size_t bytes) {
  if (transport_ == Transport::solo) {
    std::memcpy(all, mine, bytes);
    return;
  }
  Timed timed(stats_, bytes);
  MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE, impl_->comm);
}

void Exchange::broadcast(void* data, size_t bytes, int root) {
  if (transport_ == Transport::solo) return;
  Timed timed(stats_, rank_ == root ? bytes : 0);
  MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, impl_->comm);
}

void Exchange::send(const void* data, size_t bytes, int to) {
  if (transport_ == Transport::solo) throw Error("Exchange::send: a rank alone has no one to send to");
  Timed timed(stats_, bytes);
  MPI_Send(data, static_cast<int>(bytes), MPI_BYTE, to, 0, impl_->comm);
}

void Exchange::recv(void* data, size_t bytes, int from) {
  if (transport_ == Transport::solo) throw Error("Exchange::recv: a rank alone has no one to hear from");
  Timed timed(stats_, 0);
  MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, from, 0, impl_->comm, MPI_STATUS_IGNORE);
}

int Exchange::post_recv(void* data, size_t max_bytes, int from) {
  if (transport_ == Transport::solo) throw Error("Exchange::post_recv: a rank alone has no one to hear from");
  const int handle = impl_->next_handle++;
  MPI_Irecv(data, static_cast<int>(max_bytes), MPI_BYTE, from, 0, impl_->comm, &impl_->posted[handle]);
  return handle;
}

size_t Exchange::wait_recv(int handle) {
  Timed timed(stats_, 0);
  auto it = impl_->posted.find(handle);
  if (it == impl_->posted.end()) throw Error(cat("Exchange::wait_recv: no receive ", handle, " was posted"));
  MPI_Status status;
  MPI_Wait(&it->second, &status);
  impl_->posted.erase(it);
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  return static_cast<size_t>(bytes);
}

void Exchange::barrier() {
  if (transport_ == Transport::solo) return;
  Timed timed(stats_, 0);
  MPI_Barrier(impl_->comm);
}

}  // namespace tps
