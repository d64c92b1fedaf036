#include "runtime/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <mutex>

#include "runtime/error.h"

namespace tps {

namespace {

// The temporaries alive in this process, for the signal handlers: fixed
// storage, since a handler may neither allocate nor lock.
struct Slot {
  std::atomic<bool> claimed{false};  // by a writer
  std::atomic<bool> opening{false};  // its temporary is being created
  std::atomic<bool> live{false};     // path holds a temporary to remove
  char path[PATH_MAX];
};
constexpr int kSlots = 64;
Slot slots[kSlots];
// Set by the first handler to run: the process is ending, and a writer on
// another thread must create nothing after the handler has looked.
std::atomic<bool> ending{false};

constexpr int kCleanedSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temporaries(int sig) {
  ending.store(true);  // (sequentially consistent with `opening`: see create_temporary)
  for (Slot& s : slots) {
    // A writer between open() and arming its slot runs on another thread
    // (its own holds these signals back) and only makes system calls there:
    // wait the moment it takes, or its new file would be missed.
    while (s.opening.load()) {
    }
    if (s.live.load(std::memory_order_acquire)) unlink(s.path);
  }
  // Then the default action, as if this handler had never been there.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Installed once, and only for signals the program left at their default:
// a program that handles them itself stops in order, and its writers'
// destructors remove their temporaries.
void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kCleanedSignals) {
      struct sigaction old {};
      if (sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = remove_temporaries;
      sigemptyset(&sa.sa_mask);
      sigaction(sig, &sa, nullptr);
    }
  });
}

// A slot is claimed before its temporary exists and armed (made live) the
// moment it does, so a signal finds every file this process created.
int claim_slot() {
  for (int i = 0; i < kSlots; ++i)
    if (!slots[i].claimed.exchange(true)) return i;
  return -1;  // more writers at once than slots: this one is not cleaned on a signal
}

void arm_slot(int i, const std::string& path) {
  if (i < 0 || path.size() >= PATH_MAX) return;
  std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
  slots[i].live.store(true, std::memory_order_release);
}

void release_slot(int i) {
  if (i < 0) return;
  slots[i].live.store(false, std::memory_order_release);
  slots[i].claimed.store(false);
}

// The cleaned signals held back on this thread while a temporary is created
// and armed: one that came between the two would leave the file behind. (A
// signal another thread takes meanwhile waits on the slot's `opening`.)
class CleanedSignalsHeld {
 public:
  CleanedSignalsHeld() {
    sigset_t held;
    sigemptyset(&held);
    for (int sig : kCleanedSignals) sigaddset(&held, sig);
    pthread_sigmask(SIG_BLOCK, &held, &before_);
  }
  ~CleanedSignalsHeld() { pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  CleanedSignalsHeld(const CleanedSignalsHeld&) = delete;
  CleanedSignalsHeld& operator=(const CleanedSignalsHeld&) = delete;

 private:
  sigset_t before_;
};

// A new file beside path, created exclusively with the mode a new file gets
// (0666 less the umask), armed in `slot`.
std::pair<int, std::string> create_temporary(const std::string& path, int slot) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const uint64_t mix = (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(now.tv_nsec) ^
                         (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "%06llx", static_cast<unsigned long long>(mix % 0x1000000));
    const std::string temp = cat(path, ".tmp-", suffix);
    // Nothing that may take a lock between the two stores: a handler on
    // another thread waits for the second. Of `opening` set here and
    // `ending` set by a handler, at least one side sees the other's store:
    // either the handler waits for this file, or no file is made.
    if (slot >= 0) {
      slots[slot].opening.store(true);
      if (ending.load()) {
        slots[slot].opening.store(false);
        for (;;) pause();  // until the handler's signal ends the process
      }
    }
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) arm_slot(slot, temp);
    if (slot >= 0) slots[slot].opening.store(false, std::memory_order_release);
    if (fd >= 0) return {fd, temp};
    if (errno != EEXIST || attempt == 100)
      throw InputError(cat(path, ": cannot create ", temp, ": ", std::strerror(errno)));
  }
}

}  // namespace

std::vector<FileId> file_ids(const std::vector<std::string>& paths) {
  std::vector<FileId> ids;
  for (const std::string& p : paths) {
    struct stat st {};
    if (!p.empty() && ::stat(p.c_str(), &st) == 0) ids.push_back(FileId{st.st_dev, st.st_ino});
  }
  return ids;
}

void check_output_target(const std::string& path, const std::vector<FileId>& inputs, const std::string& flag) {
  const std::string what = flag.empty() ? path : cat(flag, " ", path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw InputError(cat(what, ": cannot check: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode))
    throw InputError(cat(what,
                         ": exists and is not a regular file (a device, directory, FIFO, socket or link); only a new "
                         "or a regular file is written"));
  if (std::find(inputs.begin(), inputs.end(), FileId{st.st_dev, st.st_ino}) != inputs.end())
    throw InputError(cat(what, ": is a file this run reads; writing it would replace it (give another path)"));
}

OutputFile::OutputFile(std::string path, const std::vector<std::string>& inputs, std::string flag)
    : path_(std::move(path)), flag_(std::move(flag)), inputs_(file_ids(inputs)) {
  check_output_target(path_, inputs_, flag_);
  install_handlers();
  const CleanedSignalsHeld held;
  slot_ = claim_slot();
  try {
    auto [fd, temp] = create_temporary(path_, slot_);
    temp_ = temp;
    out_ = fdopen(fd, "wb");
    if (!out_) {
      const int err = errno;
      ::close(fd);
      unlink(temp_.c_str());
      throw Error(cat(what(), ": cannot write: ", std::strerror(err)));
    }
  } catch (...) {  // (a constructor that throws runs no destructor)
    release_slot(slot_);
    throw;
  }
}

OutputFile::~OutputFile() {
  if (out_) std::fclose(out_);
  if (!committed_) unlink(temp_.c_str());
  release_slot(slot_);
}

std::string OutputFile::what() const { return flag_.empty() ? path_ : cat(flag_, " ", path_); }

void OutputFile::write(const void* data, size_t bytes) {
  if (!out_) throw Error(cat(what(), ": written after it was finished"));
  if (bytes && std::fwrite(data, 1, bytes, out_) != bytes)
    throw Error(cat(what(), ": cannot write: ", std::strerror(errno)));
}

void OutputFile::finish() {
  if (finished_) return;
  bool ok = std::fflush(out_) == 0 && !std::ferror(out_);
  int err = errno;
  // On disk before the rename: a crash after it must not leave an empty or
  // partial file where the old one was.
  if (ok && fsync(fileno(out_)) != 0) ok = false, err = errno;
  if (std::fclose(out_) != 0 && ok) ok = false, err = errno;
  out_ = nullptr;
  if (!ok) throw Error(cat(what(), ": cannot write: ", std::strerror(err ? err : EIO)));
  finished_ = true;
}

void OutputFile::commit() {
  finish();
  check_output_target(path_, inputs_, flag_);  // again: something may have appeared there meanwhile
  if (std::rename(temp_.c_str(), path_.c_str()) != 0)
    throw Error(cat(what(), ": cannot rename ", temp_, " to it: ", std::strerror(errno)));
  committed_ = true;
  release_slot(slot_);
  slot_ = -1;
}

}  // namespace tps
