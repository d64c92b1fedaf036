// runtime/base64.h against RFC 4648's test vectors, every byte value through
// a round trip, and what is not base64 refused.
#include <gtest/gtest.h>

#include "runtime/base64.h"

namespace tps {
namespace {

TEST(Base64, GivesTheRfcVectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    EXPECT_EQ(base64_encode(bytes), text);
    std::string back;
    EXPECT_TRUE(base64_decode(text, back)) << text;
    EXPECT_EQ(back, bytes);
  }
  std::string unpadded;
  EXPECT_TRUE(base64_decode("Zm8", unpadded));
  EXPECT_EQ(unpadded, "fo");
}

TEST(Base64, EveryByteRoundTrips) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (size_t n = 0; n <= all.size(); n += 37) {
    std::string back;
    ASSERT_TRUE(base64_decode(base64_encode(all.substr(0, n)), back));
    EXPECT_EQ(back, all.substr(0, n));
  }
}

TEST(Base64, WhatIsNotBase64IsRefused) {
  std::string out;
  for (const char* bad : {"Zm9v!", "Z", "Zm9vY", "Zm8=Zm8=", "Zg=", "Zm 8=", "===="})
    EXPECT_FALSE(base64_decode(bad, out)) << bad;
}

}  // namespace
}  // namespace tps
