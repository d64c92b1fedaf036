#include "runtime/mapped_file.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace tps {

namespace {

std::string identity_of(const struct stat& st) {
  return cat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO given as a file must not wait for a writer; a
  // regular file reads the same with it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw InputError(cat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    throw InputError(cat(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw InputError(cat(path, ": not a regular file"));
  }
  identity_ = identity_of(st);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;
  void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd_);
    throw Error(cat(path, ": cannot map: ", std::strerror(err)));
  }
  data_ = static_cast<const uint8_t*>(p);
  owned_ = true;
  // What the page cache holds of the file before this process reads it.
  std::vector<unsigned char> in((size_ + page_size() - 1) / page_size());
  if (mincore(p, size_, in.data()) == 0) {
    cached_at_open_.resize(in.size());
    for (size_t i = 0; i < in.size(); ++i) cached_at_open_[i] = in[i] & 1;  // the other bits are reserved
  }
}

MappedFile::MappedFile(const uint8_t* data, size_t size, std::string name)
    : path_(std::move(name)), data_(data), size_(size) {}

MappedFile::~MappedFile() {
  if (owned_ && data_) munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)),
      data_(o.data_),
      size_(o.size_),
      owned_(o.owned_),
      fd_(o.fd_),
      identity_(std::move(o.identity_)),
      cached_at_open_(std::move(o.cached_at_open_)) {
  o.data_ = nullptr;
  o.owned_ = false;
  o.fd_ = -1;
}

std::string MappedFile::identity() const { return identity_; }

bool MappedFile::changed_on_disk() const {
  struct stat st {};
  return fd_ >= 0 && (fstat(fd_, &st) != 0 || identity_of(st) != identity_);
}

namespace {
// Hints only: a refused madvise changes nothing the program relies on, so
// its result is not checked.
void advise(const uint8_t* base, size_t size, size_t offset, size_t bytes, int how) {
  if (!base || offset >= size) return;
  bytes = std::min(bytes, size - offset);
  const size_t page = page_size();
  uintptr_t begin = reinterpret_cast<uintptr_t>(base + offset) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(base + offset + bytes);
  madvise(reinterpret_cast<void*>(begin), end - begin, how);
}
}  // namespace

void MappedFile::read_into_page_cache(size_t offset, size_t bytes) const {
  if (!owned_ || offset >= size_) return;
  const size_t end = offset + std::min(bytes, size_ - offset);
  std::vector<uint8_t> buffer(1 << 20);
  for (size_t at = offset; at < end;) {
    const ssize_t got = pread(fd_, buffer.data(), std::min(buffer.size(), end - at), static_cast<off_t>(at));
    if (got <= 0) break;
    at += static_cast<size_t>(got);
  }
}

void MappedFile::advise_dontneed(size_t offset, size_t bytes) const {
  if (owned_) advise(data_, size_, offset, bytes, MADV_DONTNEED);
}

void MappedFile::drop_page_cache(size_t offset, size_t bytes) const {
  if (!owned_ || offset >= size_ || bytes == 0) return;
  const size_t page = page_size(), end = offset + std::min(bytes, size_ - offset);
  // Whole pages only: a page shared with a neighbouring range the caller
  // keeps stays. (Without mincore's answer, every page is dropped.)
  const size_t first = (offset + page - 1) / page, last = end == size_ ? (size_ + page - 1) / page : end / page;
  for (size_t p = first; p < last;) {
    if (p < cached_at_open_.size() && cached_at_open_[p]) {
      ++p;
      continue;
    }
    size_t q = p;
    while (q < last && !(q < cached_at_open_.size() && cached_at_open_[q])) ++q;
    // This process's pages first, or the cache keeps them. (A length of 0
    // would tell fadvise "to the end of the file": q > p here.)
    advise_dontneed(p * page, (q - p) * page);
    posix_fadvise(fd_, static_cast<off_t>(p * page), static_cast<off_t>((q - p) * page), POSIX_FADV_DONTNEED);
    p = q;
  }
}

namespace {

// The jump of the read_mapping running on this thread; null elsewhere.
thread_local sigjmp_buf* t_read_jump = nullptr;

void on_sigbus(int sig) {
  if (t_read_jump) siglongjmp(*t_read_jump, 1);
  signal(sig, SIG_DFL);  // not inside read_mapping: the default action
  raise(sig);
}

}  // namespace

bool read_mapping(const std::function<void()>& read) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction sa {};
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
  });
  sigjmp_buf jump;
  // (Saving the signal mask: the jump leaves the handler, where SIGBUS is
  // blocked; a later SIGBUS blocked would kill the process.)
  if (sigsetjmp(jump, 1) != 0) {
    t_read_jump = nullptr;
    return false;
  }
  t_read_jump = &jump;
  try {
    read();
  } catch (...) {  // the jump dies with this frame
    t_read_jump = nullptr;
    throw;
  }
  t_read_jump = nullptr;
  return true;
}

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  const MappedFile f(path);
  if (f.size() > max_bytes)
    throw InputError(cat(path, ": ", f.size(), " bytes, more than the ", max_bytes, " a text file may have"));
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

}  // namespace tps
