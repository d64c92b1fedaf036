// The file mapping's page-cache controls, seen through mincore: what they
// drop and what they read in.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/mapped_file.h"

namespace tps {
namespace {

// A file of `pages` pages written to disk, removed on destruction.
struct TempFile {
  std::string path;
  explicit TempFile(size_t pages) {
    std::string pattern = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/tps-map-XXXXXX";
    const int fd = mkstemp(pattern.data());
    EXPECT_GE(fd, 0);
    path = pattern;
    const std::vector<char> bytes(pages * page_size(), 'x');
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    EXPECT_EQ(fsync(fd), 0);
    close(fd);
  }
  ~TempFile() { unlink(path.c_str()); }
  static size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
};

// Which of the mapping's pages are in the page cache, and how many.
std::vector<bool> resident(const MappedFile& m) {
  std::vector<unsigned char> in(m.size() / TempFile::page_size());
  EXPECT_EQ(mincore(const_cast<uint8_t*>(m.data()), m.size(), in.data()), 0);
  std::vector<bool> out;
  for (unsigned char c : in) out.push_back(c & 1);  // the other bits are reserved
  return out;
}
size_t resident_pages(const MappedFile& m) {
  const std::vector<bool> pages = resident(m);
  return static_cast<size_t>(std::count(pages.begin(), pages.end(), true));
}

TEST(MappedFile, DroppingNoBytesDropsNothingAndDroppingARangeDropsIt) {
  const size_t pages = 64;
  TempFile f(pages);
  const MappedFile m(f.path);
  // Dropped and read again: clean pages the kernel can drop (just after the
  // write it kept them).
  m.drop_page_cache(0, m.size());
  m.read_into_page_cache(0, m.size());
  ASSERT_EQ(resident_pages(m), pages);
  // An empty range, as for a tensor at the start of the data: fadvise would
  // read a length of 0 as "to the end of the file".
  m.drop_page_cache(TempFile::page_size(), 0);
  EXPECT_EQ(resident_pages(m), pages);
  m.drop_page_cache(0, m.size());
  EXPECT_EQ(resident_pages(m), 0u);
}

TEST(MappedFile, ReadIntoPageCacheReadsTheRangeOnly) {
  const size_t pages = 64, page = TempFile::page_size();
  TempFile f(pages);
  const MappedFile m(f.path);
  m.drop_page_cache(0, m.size());
  ASSERT_EQ(resident_pages(m), 0u);
  m.read_into_page_cache(8 * page, 16 * page);
  // The kernel may read ahead past the range, never less than it.
  EXPECT_GE(resident_pages(m), 16u);
  const std::vector<bool> in = resident(m);
  for (size_t p = 8; p < 24; ++p) EXPECT_TRUE(in[p]) << "page " << p;
}

}  // namespace
}  // namespace tps
