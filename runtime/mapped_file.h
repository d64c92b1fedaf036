// A read-only memory mapping of a whole file, unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tps {

class MappedFile {
 public:
  // Throws InputError naming the path and the reason (missing, unreadable,
  // not a regular file: a directory, FIFO or device); Error when a readable
  // file cannot be mapped.
  explicit MappedFile(const std::string& path);
  // A mapping of memory the caller owns (for parsing in-memory bytes, e.g.
  // fuzzing): nothing is unmapped.
  MappedFile(const uint8_t* data, size_t size, std::string name);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Which file was opened: device, inode, size and modification time, as
  // "dev:ino:size:mtime" (empty for memory the caller owns). Two opens of
  // the same unchanged file give the same text.
  std::string identity() const;
  // Whether the file's size or modification time differ from when it was
  // opened: it was rewritten in place, so the bytes read from the mapping
  // may be a mix. (A file replaced by a rename leaves this mapping whole.)
  bool changed_on_disk() const;

  // Kernel hint for a byte range (clamped to the file; nothing for memory
  // the caller owns): drop its pages from this process (the page cache may
  // keep them).
  void advise_dontneed(size_t offset, size_t bytes) const;
  // Reads a byte range (clamped) into the page cache with read(2), not into
  // this process's memory, so that first touches of the mapping do not wait
  // on the disk. (fadvise WILLNEED read nothing in on the
  // development VM's ext4.) Nothing for memory the caller owns or on a read
  // error: the mapping still reads the bytes when touched.
  void read_into_page_cache(size_t offset, size_t bytes) const;
  // Asks the kernel to drop the pages of a byte range of the file from the
  // page cache -- only those that were not there when the file was opened:
  // what another program had read in (it may still need them) stays, and so
  // do pages another process maps. Acts on the file opened, never on
  // whatever its path names now. A hint too.
  void drop_page_cache(size_t offset, size_t bytes) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;
  int fd_ = -1;  // the file opened, kept for the page-cache calls
  std::string identity_;
  std::vector<bool> cached_at_open_;  // per page
};

// Runs `read`, which reads file mappings, on the calling thread. Returns
// false if a read touched a page the file no longer has (SIGBUS: the file
// was truncated since it was mapped) -- the rest of `read` is then skipped
// -- so that the caller can name the file instead of the process dying.
// Elsewhere, SIGBUS keeps its default action. `read` must hold no objects
// with destructors across its reads (the skip is a siglongjmp); what it
// throws passes through.
bool read_mapping(const std::function<void()>& read);

// The contents of a regular file of text (prompts, token ids) of at most
// max_bytes; InputError naming the path otherwise.
std::string read_text_file(const std::string& path, uint64_t max_bytes = uint64_t{1} << 30);

}  // namespace tps
