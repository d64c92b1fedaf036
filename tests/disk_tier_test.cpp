// The prompt cache's disk tier (engine/cache/disk_tier.h) on its own: what
// it writes it reads back; a file cut short, from another model, KV type,
// split, rank count or format version, or with a damaged header or payload
// gets one warning naming it and the reason (past the first few, one count)
// and is never used, removed or overwritten; an interrupted write's
// temporary goes at start; the directory's bytes stay within the cap, the least
// recently used own files going first; a directory that cannot be made or
// written turns the tier off with one warning.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "engine/cache/disk_tier.h"
#include "tests/temp_path.h"

namespace tps {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kFull = 256, kSliding = 64;

const DiskIdentity kMe{.model = 0x1234, .kv_type = KvType::f32, .ranks = 2, .split = SplitMode::tensor, .rank = 1};

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_path(name);
  fs::remove_all(dir);
  return dir;
}

std::vector<uint8_t> payload(uint64_t bytes, int seed) {
  std::vector<uint8_t> p(bytes);
  for (uint64_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 31 + seed);
  return p;
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string name_of(int rank, int sliding, uint64_t key) {
  char name[64];
  std::snprintf(name, sizeof name, "r%d-%s-%016llx.tpskv", rank, sliding ? "sliding" : "full",
                static_cast<unsigned long long>(key));
  return name;
}

// What a start does with the blocks a tier offers: reads each (a file's
// payload and checksum are read then, its header when the tier starts).
void read_all(DiskTier& t) {
  std::vector<uint8_t> got(std::max(kFull, kSliding));
  for (const DiskTier::Block& b : t.blocks()) t.read(b, got.data());
}

TEST(DiskTier, WhatItWritesTheNextStartReadsBack) {
  const std::string dir = fresh_dir("disk-roundtrip");
  {
    DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
    ASSERT_TRUE(t.on());
    t.write({BlockKind::full, 7}, payload(kFull, 1).data());
    t.write({BlockKind::sliding, 7}, payload(kSliding, 2).data());
    t.write({BlockKind::full, 7}, payload(kFull, 3).data());  // there already: not written again
    t.flush();
    EXPECT_EQ(t.stats().written, 2);
    EXPECT_EQ(t.stats().files, 2);
  }
  DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
  EXPECT_TRUE(t.warnings().empty());
  ASSERT_EQ(t.blocks().size(), 2u);
  std::vector<uint8_t> got(kFull);
  ASSERT_TRUE(t.read({BlockKind::full, 7}, got.data()));
  EXPECT_EQ(got, payload(kFull, 1));
  got.resize(kSliding);
  ASSERT_TRUE(t.read({BlockKind::sliding, 7}, got.data()));
  EXPECT_EQ(got, payload(kSliding, 2));
  fs::remove_all(dir);
}

// Each damaged or foreign file: the reason in one warning naming the file,
// the block not offered, the file left as it was (a write of its block too).
TEST(DiskTier, EachBadFileGetsOneWarningAndIsNeverUsed) {
  auto header = [](std::vector<char>& f) { return reinterpret_cast<DiskHeader*>(f.data()); };
  struct Case {
    std::string reason;
    std::function<void(std::vector<char>&)> spoil;
  };
  const std::vector<Case> cases = {
      {"truncated", [](std::vector<char>& f) { f.pop_back(); }},
      {"truncated", [](std::vector<char>& f) { f.resize(10); }},
      {"another model", [&](std::vector<char>& f) { header(f)->model ^= 1; }},
      {"KV type f16", [&](std::vector<char>& f) { header(f)->kv_type = static_cast<uint32_t>(KvType::f16); }},
      {"split", [&](std::vector<char>& f) { header(f)->split = static_cast<uint32_t>(SplitMode::layers); }},
      {"written for 4 rank(s)", [&](std::vector<char>& f) { header(f)->ranks = 4; }},
      {"format version 2", [&](std::vector<char>& f) { header(f)->version = 2; }},
      {"magic", [&](std::vector<char>& f) { f[0] = 'X'; }},
      {"bad checksum", [&](std::vector<char>& f) { f.back() ^= 0x10; }},
      {"bad checksum", [&](std::vector<char>& f) { f[sizeof(DiskHeader) - 8] ^= 0x01; }},  // the checksum itself
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string dir = fresh_dir("disk-bad");
    const uint64_t key = 100 + i;
    {
      DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
      t.write({BlockKind::full, 1}, payload(kFull, 1).data());
      t.write({BlockKind::full, key}, payload(kFull, 2).data());
    }
    const std::string name = name_of(1, 0, key);
    std::vector<char> f = bytes_of(dir + "/" + name);
    ASSERT_EQ(f.size(), sizeof(DiskHeader) + kFull);
    cases[i].spoil(f);
    put(dir + "/" + name, f);
    put(dir + "/" + name_of(0, 0, 5), {'x'});  // another rank's name: not this rank's to read
    put(dir + "/notes.txt", {'x'});
    DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
    read_all(t);
    ASSERT_EQ(t.warnings().size(), 1u) << cases[i].reason;
    const std::string w = t.warnings()[0];
    EXPECT_NE(w.find(name), std::string::npos) << w;
    EXPECT_NE(w.find(cases[i].reason), std::string::npos) << w;
    EXPECT_NE(w.find("not used"), std::string::npos) << w;
    EXPECT_FALSE(t.has({BlockKind::full, key}));
    EXPECT_EQ(t.stats().bad_files, 1);
    ASSERT_EQ(t.blocks().size(), 1u);  // the good one
    EXPECT_EQ(t.blocks()[0].key, 1u);
    t.write({BlockKind::full, key}, payload(kFull, 9).data());  // a foreign file of that name: left alone
    t.flush();
    EXPECT_EQ(bytes_of(dir + "/" + name), f);
    EXPECT_EQ(t.stats().written, 0);
    fs::remove_all(dir);
  }
}

// The checksum covers the header: a block's file given another block's key
// (its header edited and the file renamed to match, or, the same, a payload
// moved under another block's header) is refused, not loaded as that block.
TEST(DiskTier, AHeaderEditedOrAPayloadMovedUnderAnotherKeyIsRefused) {
  const std::string dir = fresh_dir("disk-moved");
  {
    DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
    t.write({BlockKind::full, 1}, payload(kFull, 1).data());
    t.write({BlockKind::full, 2}, payload(kFull, 2).data());
  }
  std::vector<char> moved = bytes_of(dir + "/" + name_of(1, 0, 1));
  reinterpret_cast<DiskHeader*>(moved.data())->key = 2;
  put(dir + "/" + name_of(1, 0, 2), moved);  // block 1's payload as block 2
  DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
  read_all(t);
  EXPECT_FALSE(t.has({BlockKind::full, 2}));
  ASSERT_EQ(t.warnings().size(), 1u);
  EXPECT_NE(t.warnings()[0].find(name_of(1, 0, 2)), std::string::npos) << t.warnings()[0];
  EXPECT_NE(t.warnings()[0].find("bad checksum"), std::string::npos) << t.warnings()[0];
  std::vector<uint8_t> got(kFull);
  EXPECT_FALSE(t.read({BlockKind::full, 2}, got.data()));
  fs::remove_all(dir);
}

// A directory of thousands of unusable files (another format version's)
// says so in a few lines: the first kDiskBadFilesNamed named, then one count.
TEST(DiskTier, ManyBadFilesAreNamedFirstFewThenCounted) {
  const std::string dir = fresh_dir("disk-many-bad");
  constexpr int kBad = 40;
  {
    DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
    for (int key = 1; key <= kBad; ++key)
      t.write({BlockKind::full, static_cast<uint64_t>(key)}, payload(kFull, key).data());
  }
  for (int key = 1; key <= kBad; ++key) {
    const std::string path = dir + "/" + name_of(1, 0, key);
    std::vector<char> f = bytes_of(path);
    reinterpret_cast<DiskHeader*>(f.data())->version = 2;
    put(path, f);
  }
  DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
  EXPECT_TRUE(t.blocks().empty());
  EXPECT_EQ(t.stats().bad_files, kBad);
  ASSERT_EQ(t.warnings().size(), static_cast<size_t>(kDiskBadFilesNamed + 1));
  for (int i = 0; i < kDiskBadFilesNamed; ++i)
    EXPECT_NE(t.warnings()[i].find("format version 2"), std::string::npos) << t.warnings()[i];
  const std::string count = t.warnings().back();
  EXPECT_NE(count.find(std::to_string(kBad - kDiskBadFilesNamed) + " more"), std::string::npos) << count;
  EXPECT_NE(count.find(std::to_string(kBad) + " in all"), std::string::npos) << count;
  fs::remove_all(dir);
}

// What a write killed between its temporary and its rename leaves
// (NAME.tpskv.tmp-XXXXXX) goes at the next start: this rank's only.
TEST(DiskTier, AnInterruptedWritesTemporaryIsRemovedAtStart) {
  const std::string dir = fresh_dir("disk-temporaries");
  fs::create_directories(dir);
  const std::string mine = dir + "/" + name_of(1, 0, 7) + ".tmp-0a1b2c";
  const std::string another_rank = dir + "/" + name_of(0, 0, 7) + ".tmp-0a1b2c";
  const std::string not_ours = dir + "/notes.txt.tmp-0a1b2c";
  for (const std::string& p : {mine, another_rank, not_ours}) put(p, std::vector<char>(100, 'x'));
  DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
  EXPECT_TRUE(t.warnings().empty());
  EXPECT_FALSE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(another_rank));
  EXPECT_TRUE(fs::exists(not_ours));
  EXPECT_EQ(t.stats().temporaries_removed, 1);
  EXPECT_EQ(t.stats().files, 0);
  fs::remove_all(dir);
}

// A cap of three full blocks' files: the fourth write removes the least
// recently used (written or touched) own file, never a foreign one.
TEST(DiskTier, TheDirectoryStaysWithinItsCapLeastRecentlyUsedFirst) {
  const std::string dir = fresh_dir("disk-cap");
  fs::create_directories(dir);
  put(dir + "/" + name_of(1, 0, 99), std::vector<char>(4096, 'z'));  // foreign, larger than the cap
  DiskTier t(dir, kMe, 3 * (sizeof(DiskHeader) + kFull), kFull, kSliding);
  ASSERT_EQ(t.warnings().size(), 1u);
  for (uint64_t key : {1, 2, 3}) t.write({BlockKind::full, key}, payload(kFull, static_cast<int>(key)).data());
  t.touch({BlockKind::full, 1});
  t.write({BlockKind::full, 4}, payload(kFull, 4).data());
  t.flush();
  EXPECT_TRUE(t.has({BlockKind::full, 1}));
  EXPECT_FALSE(t.has({BlockKind::full, 2}));
  EXPECT_FALSE(fs::exists(dir + "/" + name_of(1, 0, 2)));
  EXPECT_TRUE(fs::exists(dir + "/" + name_of(1, 0, 99)));
  EXPECT_EQ(t.stats().files, 3);
  EXPECT_EQ(t.stats().bytes, static_cast<int64_t>(3 * (sizeof(DiskHeader) + kFull)));
  const std::vector<DiskTier::Block> order = t.blocks();  // most recently used first
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].key, 4u);
  EXPECT_EQ(order[1].key, 1u);
  EXPECT_EQ(order[2].key, 3u);
  fs::remove_all(dir);
}

TEST(DiskTier, ADirectoryThatCannotBeMadeOrWrittenTurnsItOffWithOneWarning) {
  const std::string file = testing::temp_path("disk-a-file");
  put(file, {'x'});
  DiskTier under_a_file(file + "/cache", kMe, 1 << 20, kFull, kSliding);
  EXPECT_FALSE(under_a_file.on());
  ASSERT_EQ(under_a_file.warnings().size(), 1u);
  EXPECT_NE(under_a_file.warnings()[0].find(file + "/cache"), std::string::npos) << under_a_file.warnings()[0];
  under_a_file.write({BlockKind::full, 1}, payload(kFull, 1).data());  // nothing, quietly
  EXPECT_EQ(under_a_file.warnings().size(), 1u);
  fs::remove(file);

  const std::string dir = fresh_dir("disk-gone");
  DiskTier gone(dir, kMe, 1 << 20, kFull, kSliding);
  ASSERT_TRUE(gone.on());
  fs::remove_all(dir);  // as a full or vanished disk: the write fails
  gone.write({BlockKind::full, 1}, payload(kFull, 1).data());
  gone.write({BlockKind::full, 2}, payload(kFull, 2).data());
  gone.flush();
  EXPECT_FALSE(gone.on());
  EXPECT_EQ(gone.stats().write_failures, 1);
  ASSERT_EQ(gone.warnings().size(), 1u);
  EXPECT_NE(gone.warnings()[0].find("going on without the disk tier"), std::string::npos) << gone.warnings()[0];
}

}  // namespace
}  // namespace tps
