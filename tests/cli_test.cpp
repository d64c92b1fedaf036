// The command-line conventions the tools share (launch/cli.h): sizes with
// their units.
#include <gtest/gtest.h>

#include "launch/cli.h"
#include "runtime/error.h"

namespace tps {
namespace {

TEST(Cli, SizesReadWithTheirUnits) {
  EXPECT_EQ(parse_size("16384", "--x")->value, 16384u);
  EXPECT_FALSE(parse_size("16384", "--x")->has_unit);
  EXPECT_EQ(parse_size("2G", "--x")->value, 2ull << 30);
  EXPECT_EQ(parse_size("512MiB", "--x")->value, 512ull << 20);
  EXPECT_TRUE(parse_size("64K", "--x")->has_unit);
  EXPECT_EQ(parse_size("17179869183G", "--x")->value, 17179869183ull << 30);  // the last that fits
  for (const char* text : {"", "0", "-1", "+5", "1.5", "abc", "2T", "G", " 5"})
    EXPECT_FALSE(parse_size(text, "--x").has_value()) << text;
}

TEST(Cli, SizesPast2To64AreRefusedNamingTheFlag) {
  // They wrapped: 2^34 G is 2^64 bytes, which was taken as 0.
  for (const char* text : {"17179869184G", "1099511627776G", "99999999999999999999G", "99999999999999999999",
                           "18446744073709551616", "18014398509481984K"}) {
    try {
      parse_size(text, "--kv-size");
      ADD_FAILURE() << text << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("--kv-size ") + text + ": more than 2^64", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace tps
