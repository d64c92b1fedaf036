// The file mapping's page-cache controls, seen through mincore: what they
// drop and what they read in.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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

// Drops the file's clean pages from the page cache, as another program's
// reading would have left them not.
void evict(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  close(fd);
}

TEST(MappedFile, DropsWhatItReadInAndNotWhatTheCacheHadBefore) {
  const size_t pages = 64, page = TempFile::page_size();
  TempFile f(pages);
  evict(f.path);
  const MappedFile m(f.path);
  ASSERT_EQ(resident_pages(m), 0u);
  m.read_into_page_cache(0, m.size());
  ASSERT_EQ(resident_pages(m), pages);
  // An empty range, as for a tensor at the start of the data: fadvise would
  // read a length of 0 as "to the end of the file".
  m.drop_page_cache(page, 0);
  EXPECT_EQ(resident_pages(m), pages);
  // Whole pages of the range only: its partial first and last pages stay.
  m.drop_page_cache(page / 2, 8 * page);
  const std::vector<bool> in = resident(m);
  EXPECT_TRUE(in[0] && in[8]);
  for (size_t p = 1; p < 8; ++p) EXPECT_FALSE(in[p]) << "page " << p;
  m.drop_page_cache(0, m.size());
  EXPECT_EQ(resident_pages(m), 0u);

  // Cached before it was opened (another program read it): it stays.
  m.read_into_page_cache(0, m.size());
  const MappedFile again(f.path);
  again.drop_page_cache(0, again.size());
  EXPECT_EQ(resident_pages(again), pages);
}

TEST(MappedFile, ReadIntoPageCacheReadsTheRangeOnly) {
  const size_t pages = 64, page = TempFile::page_size();
  TempFile f(pages);
  evict(f.path);
  const MappedFile m(f.path);
  ASSERT_EQ(resident_pages(m), 0u);
  m.read_into_page_cache(8 * page, 16 * page);
  // The kernel may read ahead past the range, never less than it.
  EXPECT_GE(resident_pages(m), 16u);
  const std::vector<bool> in = resident(m);
  for (size_t p = 8; p < 24; ++p) EXPECT_TRUE(in[p]) << "page " << p;
}

TEST(MappedFile, APathReplacedByARenameLeavesTheMappingAndTheNewFileAlone) {
  const size_t pages = 16;
  TempFile f(pages), replacement(pages);
  evict(f.path);
  const MappedFile m(f.path);
  const std::string before = m.identity();
  EXPECT_EQ(MappedFile(f.path).identity(), before);
  m.read_into_page_cache(0, m.size());
  ASSERT_EQ(std::rename(replacement.path.c_str(), f.path.c_str()), 0);
  EXPECT_FALSE(m.changed_on_disk());  // the mapping still has the file it opened
  EXPECT_NE(MappedFile(f.path).identity(), before);
  const MappedFile now(f.path);
  now.read_into_page_cache(0, now.size());
  m.drop_page_cache(0, m.size());  // the opened file's pages, not the path's
  EXPECT_EQ(resident_pages(m), 0u);
  EXPECT_EQ(resident_pages(now), pages);
}

TEST(MappedFile, AFileTruncatedUnderTheMappingIsSeenNotACrash) {
  const size_t pages = 16, page = TempFile::page_size();
  TempFile f(pages);
  const MappedFile m(f.path);
  volatile uint8_t sum = 0;
  EXPECT_TRUE(read_mapping([&] { sum = sum + m.data()[pages * page - 1]; }));
  EXPECT_FALSE(m.changed_on_disk());
  ASSERT_EQ(truncate(f.path.c_str(), static_cast<off_t>(4 * page)), 0);
  EXPECT_TRUE(m.changed_on_disk());
  bool after = false;
  EXPECT_FALSE(read_mapping([&] {
    sum = sum + m.data()[8 * page];
    after = true;  // skipped: the read above faulted
  }));
  EXPECT_FALSE(after);
  // The thread reads on (the signal mask was restored), and faults again.
  EXPECT_TRUE(read_mapping([&] { sum = sum + m.data()[0]; }));
  EXPECT_FALSE(read_mapping([&] { sum = sum + m.data()[12 * page]; }));
}

}  // namespace
}  // namespace tps
