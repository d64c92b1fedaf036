// The prompt cache's disk tier (engine/step/disk_tier.h) on its own: what
// it writes it reads back; a file cut short, from another model, KV type,
// split, rank count or format version, or with a damaged payload gets one
// warning naming it and the reason and is never used, removed or
// overwritten; the directory's bytes stay within the cap, the least
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

#include "engine/step/disk_tier.h"
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

TEST(DiskTier, WhatItWritesTheNextStartReadsBack) {
  const std::string dir = fresh_dir("disk-roundtrip");
  {
    DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
    ASSERT_TRUE(t.on());
    t.write({0, 7}, payload(kFull, 1).data());
    t.write({1, 7}, payload(kSliding, 2).data());
    t.write({0, 7}, payload(kFull, 3).data());  // there already: not written again
    EXPECT_EQ(t.stats().written, 2);
    EXPECT_EQ(t.stats().files, 2);
  }
  DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
  EXPECT_TRUE(t.warnings().empty());
  ASSERT_EQ(t.blocks().size(), 2u);
  std::vector<uint8_t> got(kFull);
  ASSERT_TRUE(t.read({0, 7}, got.data()));
  EXPECT_EQ(got, payload(kFull, 1));
  got.resize(kSliding);
  ASSERT_TRUE(t.read({1, 7}, got.data()));
  EXPECT_EQ(got, payload(kSliding, 2));
  fs::remove_all(dir);
}

// Each damaged or foreign file: the reason in one warning naming the file,
// the block not offered, the file left as it was (a write of its block too).
TEST(DiskTier, EachBadFileGetsOneWarningAndIsNeverUsed) {
  const std::string dir = fresh_dir("disk-bad");
  {
    DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
    t.write({0, 1}, payload(kFull, 1).data());
  }
  const std::vector<char> good = bytes_of(dir + "/" + name_of(1, 0, 1));
  ASSERT_EQ(good.size(), sizeof(DiskHeader) + kFull);
  struct Case {
    std::string reason;
    std::function<void(std::vector<char>&)> spoil;
  };
  auto header = [](std::vector<char>& f) { return reinterpret_cast<DiskHeader*>(f.data()); };
  const std::vector<Case> cases = {
      {"truncated", [](std::vector<char>& f) { f.pop_back(); }},
      {"truncated", [](std::vector<char>& f) { f.resize(10); }},
      {"another model", [&](std::vector<char>& f) { header(f)->model ^= 1; }},
      {"KV type f16", [&](std::vector<char>& f) { header(f)->kv_type = static_cast<uint32_t>(KvType::f16); }},
      {"split", [&](std::vector<char>& f) { header(f)->split = static_cast<uint32_t>(SplitMode::layers); }},
      {"written for 4 rank(s)", [&](std::vector<char>& f) { header(f)->ranks = 4; }},
      {"format version 1", [&](std::vector<char>& f) { header(f)->version = kDiskFormatVersion - 1; }},
      {"magic", [&](std::vector<char>& f) { f[0] = 'X'; }},
      {"bad checksum", [&](std::vector<char>& f) { f.back() ^= 0x10; }},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<char> f = good;
    const uint64_t key = 100 + i;
    header(f)->key = key;
    cases[i].spoil(f);
    put(dir + "/" + name_of(1, 0, key), f);
  }
  put(dir + "/" + name_of(0, 0, 5), {'x'});  // another rank's name: not this rank's to read
  put(dir + "/notes.txt", {'x'});
  DiskTier t(dir, kMe, 1 << 20, kFull, kSliding);
  ASSERT_EQ(t.warnings().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = name_of(1, 0, 100 + i);
    const auto w = std::find_if(t.warnings().begin(), t.warnings().end(),
                                [&](const std::string& s) { return s.find(name) != std::string::npos; });
    ASSERT_NE(w, t.warnings().end()) << name;
    EXPECT_NE(w->find(cases[i].reason), std::string::npos) << *w;
    EXPECT_NE(w->find("not used"), std::string::npos) << *w;
    EXPECT_FALSE(t.has({0, 100 + i}));
  }
  ASSERT_EQ(t.blocks().size(), 1u);  // the good one
  EXPECT_EQ(t.blocks()[0].key, 1u);
  const std::vector<char> before = bytes_of(dir + "/" + name_of(1, 0, 108));
  t.write({0, 108}, payload(kFull, 9).data());  // a foreign file of that name: left alone
  EXPECT_EQ(bytes_of(dir + "/" + name_of(1, 0, 108)), before);
  EXPECT_EQ(t.stats().written, 0);
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
  for (uint64_t key : {1, 2, 3}) t.write({0, key}, payload(kFull, static_cast<int>(key)).data());
  t.touch({0, 1});
  t.write({0, 4}, payload(kFull, 4).data());
  EXPECT_TRUE(t.has({0, 1}));
  EXPECT_FALSE(t.has({0, 2}));
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
  under_a_file.write({0, 1}, payload(kFull, 1).data());  // nothing, quietly
  EXPECT_EQ(under_a_file.warnings().size(), 1u);
  fs::remove(file);

  const std::string dir = fresh_dir("disk-gone");
  DiskTier gone(dir, kMe, 1 << 20, kFull, kSliding);
  ASSERT_TRUE(gone.on());
  fs::remove_all(dir);  // as a full or vanished disk: the write fails
  gone.write({0, 1}, payload(kFull, 1).data());
  gone.write({0, 2}, payload(kFull, 2).data());
  EXPECT_FALSE(gone.on());
  EXPECT_EQ(gone.stats().write_failures, 1);
  ASSERT_EQ(gone.warnings().size(), 1u);
  EXPECT_NE(gone.warnings()[0].find("going on without the disk tier"), std::string::npos) << gone.warnings()[0];
}

}  // namespace
}  // namespace tps
