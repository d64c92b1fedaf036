// The tokenizer's hash table (engine/text/flat_table.h): every key found
// after many collisions' worth of inserts, the first value of a key kept,
// and the capacity a hard limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/text/flat_table.h"

namespace tps {
namespace {

TEST(FlatTable, FindsEveryKeyAndNothingElse) {
  std::vector<std::string> words;
  for (int i = 0; i < 5000; ++i) words.push_back(std::to_string(i).append("w"));
  FlatTable<std::string_view, int32_t> table(words.size());
  for (size_t i = 0; i < words.size(); ++i) ASSERT_TRUE(table.insert(words[i], static_cast<int32_t>(i)));
  for (size_t i = 0; i < words.size(); ++i) {
    const int32_t* id = table.find(words[i]);
    ASSERT_NE(id, nullptr) << words[i];
    EXPECT_EQ(*id, static_cast<int32_t>(i));
  }
  EXPECT_EQ(table.find("5000w"), nullptr);
  EXPECT_EQ(table.find(""), nullptr);
  EXPECT_EQ(table.size(), words.size());
}

TEST(FlatTable, KeepsTheFirstValueOfAKey) {
  FlatTable<uint64_t, int> table(4);
  EXPECT_TRUE(table.insert(uint64_t{7} << 32 | 9, 1));
  EXPECT_FALSE(table.insert(uint64_t{7} << 32 | 9, 2));
  EXPECT_EQ(*table.find(uint64_t{7} << 32 | 9), 1);
  EXPECT_EQ(table.find(uint64_t{9} << 32 | 7), nullptr);
}

TEST(FlatTable, HoldsNoMoreThanItsCapacity) {
  FlatTable<uint64_t, int> table(3);
  for (uint64_t k = 0; k < 3; ++k) EXPECT_TRUE(table.insert(k, static_cast<int>(k)));
  EXPECT_FALSE(table.insert(3, 3));
  EXPECT_EQ(table.find(3), nullptr);
  EXPECT_EQ(table.size(), 3u);
}

}  // namespace
}  // namespace tps
