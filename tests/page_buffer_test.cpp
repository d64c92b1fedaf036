// PageBuffer: page-aligned zeroed memory, advised for huge pages, moved
// without a double unmap, and a request the machine cannot give refused as
// an Error naming the bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "runtime/error.h"
#include "runtime/page_buffer.h"

namespace tps {
namespace {

// The VmFlags line of the mapping that holds `p`, from /proc/self/smaps
// (a mapping's first line is "start-end perms offset dev inode [path]").
std::string vm_flags_of(const void* p) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream first(line);
    if (first >> std::hex >> start >> dash >> end && dash == '-' && line.find(' ') > line.find('-'))
      in = start <= at && at < end;
    else if (in && line.rfind("VmFlags:", 0) == 0)
      return line;
  }
  return "";
}

TEST(PageBuffer, PageAlignedZeroedAndAdvisedForHugePages) {
  const size_t bytes = 3 * 1024 * 1024 + 5;
  PageBuffer b(bytes);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % sysconf(_SC_PAGESIZE), 0u);
  for (size_t i = 0; i < bytes; i += 4096) EXPECT_EQ(b.data()[i], 0) << i;
  EXPECT_EQ(b.data()[bytes - 1], 0);
  b.data()[bytes - 1] = 7;  // all of it is writable
  // MADV_HUGEPAGE shows as "hg" among the mapping's flags.
  const std::string flags = vm_flags_of(b.data());
  ASSERT_FALSE(flags.empty()) << "no mapping at the buffer in /proc/self/smaps";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

TEST(PageBuffer, MovesOwnershipAndEmptyHoldsNothing) {
  PageBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  PageBuffer a(8192);
  a.data()[0] = 1;
  uint8_t* const held = a.data();
  PageBuffer b(std::move(a));
  EXPECT_EQ(b.data(), held);
  EXPECT_EQ(b.size(), 8192u);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.size(), 0u);
  PageBuffer c(4096);
  c = std::move(b);  // c's own pages go, b's come
  EXPECT_EQ(c.data(), held);
  EXPECT_EQ(c.data()[0], 1);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move)
}

TEST(PageBuffer, MemoryThatIsNotThereIsAnErrorNamingTheBytes) {
  const size_t bytes = size_t{1} << 62;
  try {
    PageBuffer b(bytes);
    ADD_FAILURE() << "reserved 2^62 bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reserve " + std::to_string(bytes) + " bytes"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tps
