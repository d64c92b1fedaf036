#include "runtime/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace tps {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO given as a file must not wait for a writer; a
  // regular file reads the same with it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(cat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw InputError(cat(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(cat(path, ": not a regular file"));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw Error(cat(path, ": cannot map: ", std::strerror(err)));
    data_ = static_cast<const uint8_t*>(p);
    owned_ = true;
  } else {
    ::close(fd);
  }
}

MappedFile::MappedFile(const uint8_t* data, size_t size, std::string name)
    : path_(std::move(name)), data_(data), size_(size) {}

MappedFile::~MappedFile() {
  if (owned_ && data_) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(o.data_), size_(o.size_), owned_(o.owned_) {
  o.data_ = nullptr;
  o.owned_ = false;
}

namespace {
// Hints only: a refused madvise changes nothing the program relies on, so
// its result is not checked.
void advise(const uint8_t* base, size_t size, size_t offset, size_t bytes, int how) {
  if (!base || offset >= size) return;
  bytes = std::min(bytes, size - offset);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(base + offset) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(base + offset + bytes);
  madvise(reinterpret_cast<void*>(begin), end - begin, how);
}
}  // namespace

void MappedFile::read_into_page_cache(size_t offset, size_t bytes) const {
  if (!owned_ || offset >= size_) return;
  const size_t end = offset + std::min(bytes, size_ - offset);
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::vector<uint8_t> buffer(1 << 20);
  for (size_t at = offset; at < end;) {
    const ssize_t got = pread(fd, buffer.data(), std::min(buffer.size(), end - at), static_cast<off_t>(at));
    if (got <= 0) break;
    at += static_cast<size_t>(got);
  }
  ::close(fd);
}

void MappedFile::advise_dontneed(size_t offset, size_t bytes) const {
  if (owned_) advise(data_, size_, offset, bytes, MADV_DONTNEED);
}

void MappedFile::drop_page_cache(size_t offset, size_t bytes) const {
  // (A length of 0 would tell fadvise "to the end of the file".)
  if (!owned_ || offset >= size_ || bytes == 0) return;
  advise_dontneed(offset, bytes);  // this process's pages first, or the cache keeps them
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(std::min(bytes, size_ - offset)),
                POSIX_FADV_DONTNEED);
  ::close(fd);
}

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  const MappedFile f(path);
  if (f.size() > max_bytes)
    throw InputError(cat(path, ": ", f.size(), " bytes, more than the ", max_bytes, " a text file may have"));
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

}  // namespace tps
