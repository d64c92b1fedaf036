#include "runtime/mpi_session.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/launcher_stdout.h"
#include "runtime/log.h"

namespace tps {

namespace {

// Open MPI's shared-memory transport (btl/vader; btl/sm from Open MPI 5)
// keeps each rank's segment as a named file (/dev/shm/vader_segment.HOST.
// JOB.RANK) that only a clean exit, or mpirun's cleanup after the ranks are
// gone, removes: a job killed together with mpirun (SIGKILL, mpirun
// interrupted twice during a long prefill, which gives up its cleanup) left
// them in /dev/shm. Once every pair of ranks on the host has exchanged a
// message, every rank maps every segment it will use (nothing attaches
// later), so the names can go: the memory stays while a rank maps it and
// returns to the system when the last one exits, however it ends. (Open MPI
// unlinks a shared window's segment the same way, right after its ranks
// attach.) Open MPI unlinks a rank's own segment in MPI_Finalize and
// complains when it is gone, so a rank puts an empty file back under its
// own name just before.
bool is_transport_segment(const std::string& path) {
  const std::string name = path.substr(path.rfind('/') + 1);
  return name.starts_with("vader_segment.") || name.starts_with("sm_segment.");
}

// The transport segments this process maps, by path, not yet unlinked.
std::vector<std::string> mapped_segments() {
  std::vector<std::string> paths;
  // Lines "address perms offset dev inode path"; shared mappings only.
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string address, perms, offset, dev, inode, path;
    fields >> address >> perms >> offset >> dev >> inode;
    std::getline(fields >> std::ws, path);
    if (perms.size() == 4 && perms[3] == 's' && !path.ends_with(" (deleted)") && is_transport_segment(path) &&
        std::find(paths.begin(), paths.end(), path) == paths.end())
      paths.push_back(path);
  }
  return paths;
}

void unlink_transport_segments(MPI_Comm node) {
  int rank = 0, size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  if (size == 1) return;  // no local peer: no segment
  std::vector<MPI_Request> requests;
  std::vector<char> from(size);
  const char hello = 1;
  for (int r = 0; r < size; ++r)
    if (r != rank) {
      MPI_Isend(&hello, 1, MPI_CHAR, r, 0, node, &requests.emplace_back());
      MPI_Irecv(&from[r], 1, MPI_CHAR, r, 0, node, &requests.emplace_back());
    }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  MPI_Barrier(node);  // every rank has attached every segment
  for (const std::string& path : mapped_segments())
    unlink(path.c_str());  // the first rank to get there wins; the others find it gone
}

// Open MPI picks its point-to-point layer by trying each it was built with:
// UCX and libfabric (OFI) probe for network hardware, about 0.2 s of every
// rank's start even on a host that has none. A job whose ranks all share
// this host moves its messages through shared memory (ob1 over btl/vader)
// whatever the hardware, so it skips the probing; a process no launcher
// started is such a job of one, and needs no daemon either (a singleton
// starts one only to be able to spawn ranks, which tps never does). A
// user's own setting of either wins.
//
// An isolated singleton takes job family 0, so every one on the host keeps
// its session directory at the same path (TMP/ompi.HOST.UID/jf.0/1/0) and
// removes the tree on exit: one tpsrun ending while another was creating
// it failed the other's MPI_Init ("A call to mkdir was unable to create the
// desired directory"). Each singleton gets a family directory named by its
// pid instead, beside Open MPI's own tree, in the temporary directory Open
// MPI would use (its tmpdir base, else TMPDIR, TEMP, TMP, /tmp).
//
// A singleton that a signal ends (Ctrl-C, a job's timeout) never reaches
// the cleanup in MPI_Finalize: its empty tree stayed in /tmp, one more with
// every interrupted run. Each singleton therefore removes those of
// singletons no longer running, as Open MPI's orte-clean would: only
// directories, so a tree that holds any file stays as it is.
void remove_orphaned_sessions(const std::string& base, const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code error;  // nothing here may fail a start: what cannot be read or removed stays
  for (fs::directory_iterator e(base, error), end; !error && e != end; e.increment(error)) {
    const std::string name = e->path().filename().string();
    std::error_code entry;
    if (name.rfind(prefix, 0) != 0 || e->is_symlink(entry) || !e->is_directory(entry)) continue;
    char* digits_end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &digits_end, 10);
    if (pid <= 0 || *digits_end != '\0' || pid == getpid() || kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;
    // Everything under it, each after the directory holding it (symbolic
    // links not followed), then removed in the reverse order: rmdir takes
    // only empty directories, and fails, harmlessly, on anything else.
    std::vector<fs::path> paths{e->path()};
    std::error_code walk;
    for (fs::recursive_directory_iterator it(e->path(), walk), done; !walk && it != done; it.increment(walk))
      paths.push_back(it->path());
    for (auto p = paths.rbegin(); p != paths.rend(); ++p) ::rmdir(p->c_str());
  }
}

void choose_host_transport() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const bool alone = size == nullptr && std::getenv("PMIX_RANK") == nullptr && std::getenv("PMI_RANK") == nullptr;
  if (alone || (size && local && std::string_view(size) == local)) setenv("OMPI_MCA_pml", "ob1", 0);
  if (!alone) return;
  setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
  std::string base = "/tmp";
  for (const char* name : {"OMPI_MCA_orte_tmpdir_base", "TMPDIR", "TEMP", "TMP"})
    if (const char* dir = std::getenv(name); dir && *dir) {
      base = dir;
      break;
    }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string prefix =
      "ompi." + std::string(host, strcspn(host, ".")) + "." + std::to_string(getuid()) + ".singleton.";
  remove_orphaned_sessions(base, prefix);
  const std::string family = base + "/" + prefix + std::to_string(getpid());
  setenv("OMPI_MCA_orte_jobfam_session_dir", family.c_str(), 0);
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  choose_host_transport();
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  // Before any message: the one segment mapped is this rank's own.
  own_segments_ = mapped_segments();
  // Errors in MPI calls end the job (the default, made explicit): a failed
  // collective on one rank must not leave the others waiting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);

  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  host_.assign(name, len);

  MPI_Comm_dup(MPI_COMM_WORLD, &failure_comm_);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_);
  MPI_Comm_rank(node_comm_, &local_rank_);
  MPI_Comm_size(node_comm_, &local_size_);
  unlink_transport_segments(node_comm_);
  // Hosts = number of node-local rank-0s.
  int is_leader = local_rank_ == 0 ? 1 : 0;
  MPI_Allreduce(&is_leader, &host_count_, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

MpiSession::~MpiSession() {
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
  if (failure_comm_ != MPI_COMM_NULL) MPI_Comm_free(&failure_comm_);
  finalize();
}

void MpiSession::finalize() const {
  for (const std::string& path : own_segments_) {  // for MPI_Finalize to unlink (see above)
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  MPI_Finalize();
}

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<size_t>(len));
  return v.substr(0, v.find_first_of(",\n"));
}

std::vector<std::string> MpiSession::gather_to_root(const std::string& text) const {
  int len = static_cast<int>(text.size());
  std::vector<int> lens(rank_ == 0 ? size_ : 0), offsets;
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank_ == 0) {
    int total = 0;
    for (int l : lens) offsets.push_back(total), total += l;
    all.resize(total);
  }
  MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < static_cast<int>(lens.size()); ++r) out.push_back(all.substr(offsets[r], lens[r]));
  return out;
}

std::string MpiSession::broadcast_from_root(const std::string& text) const {
  int len = static_cast<int>(text.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string out = rank_ == 0 ? text : std::string(static_cast<size_t>(len), '\0');
  MPI_Bcast(out.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
}

bool MpiSession::same_on_host(const std::string& text) const {
  int len = static_cast<int>(text.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, node_comm_);
  std::string first = text;
  first.resize(static_cast<size_t>(len));
  MPI_Bcast(first.data(), len, MPI_CHAR, 0, node_comm_);
  int same = first == text, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

int64_t MpiSession::min_over_ranks(int64_t value) const {
  int64_t least = value;
  MPI_Allreduce(&value, &least, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  return least;
}

namespace {
void print_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}
}  // namespace

void MpiSession::end_job(const std::string& message, int exit_code) const {
  // What was printed goes out first: _Exit and MPI_Abort flush nothing, and
  // a run stopped by a signal prints its results before it ends non-zero.
  std::fflush(stdout);
  if (size_ == 1) {
    print_line(cat(log_tool(), ": ", message, "\n"));
    finalize();
    std::_Exit(exit_code);
  }
  // Every other rank hears of it: those that fail too say so the same way,
  // and a healthy one never answers (it waits for this rank elsewhere).
  constexpr int kNotice = 1;
  std::vector<MPI_Request> sent;
  for (int r = 0; r < size_; ++r)
    if (r != rank_)
      MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_CHAR, r, kNotice, failure_comm_,
                &sent.emplace_back());
  std::vector<bool> failed(size_, false);
  failed[rank_] = true;
  int count = 1;
  using Clock = std::chrono::steady_clock;
  const auto give_up = Clock::now() + std::chrono::duration<double>(kAgreeSeconds);
  auto quiet = Clock::now() + std::chrono::duration<double>(kQuietSeconds);
  while (count < size_ && Clock::now() < quiet && Clock::now() < give_up) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kNotice, failure_comm_, &arrived, &status);
    if (!arrived) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    int bytes = 0;
    MPI_Get_count(&status, MPI_CHAR, &bytes);
    std::string theirs(static_cast<size_t>(bytes), '\0');
    MPI_Recv(theirs.data(), bytes, MPI_CHAR, status.MPI_SOURCE, kNotice, failure_comm_, MPI_STATUS_IGNORE);
    if (!failed[status.MPI_SOURCE]) failed[status.MPI_SOURCE] = true, ++count;
    quiet = Clock::now() + std::chrono::duration<double>(kQuietSeconds);  // more may be on their way
  }
  if (count == size_) {  // every rank failed: all heard every notice, so every send was received
    MPI_Waitall(static_cast<int>(sent.size()), sent.data(), MPI_STATUSES_IGNORE);
    if (rank_ == 0) print_line(cat(log_tool(), ": ", message, "\n"));
    finalize();
    std::_Exit(exit_code);
  }
  // Not every rank: the lowest failing one that this rank heard of speaks
  // and ends the job; a higher one leaves it the time to.
  for (int r = 0; r < rank_; ++r)
    if (failed[r]) {
      std::this_thread::sleep_for(std::chrono::duration<double>(kAgreeSeconds));
      break;
    }
  print_line(cat(log_tool(), ": rank ", rank_, " on ", host_, ": ", message, "\n"));
  MPI_Abort(MPI_COMM_WORLD, exit_code);  // does not return
  std::_Exit(exit_code);
}

int run_on_all_ranks(int argc, char** argv, const std::function<int(MpiSession&)>& body) {
  MpiSession mpi(&argc, &argv);
  log_set_rank(mpi.rank(), mpi.size());
  if (mpi.rank() == 0) {  // the rank that prints writes where mpirun would, so that a failed write is its own
    std::string why;
    adopt_launcher_stdout(why);
    log_debug(why);
  }
  int code = 0;
  std::string message;
  try {
    code = body(mpi);
    if (code != 0) message = cat("exited with code ", code);
    flush_stdout();
  } catch (const Error& e) {
    mpi.end_job(e.what(), e.exit_code());
  } catch (const std::bad_alloc&) {
    mpi.end_job(kOutOfMemory, 1);
  } catch (const std::exception& e) {
    mpi.end_job(cat("internal error: ", e.what()), 1);
  }
  if (code != 0) mpi.end_job(message, code);
  return 0;
}

}  // namespace tps
