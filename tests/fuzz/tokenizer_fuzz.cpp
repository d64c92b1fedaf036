// libFuzzer target for the tokenizer: any byte string, with control tokens
// parsed or not, encodes to ids that decode to the same bytes (byte-level
// BPE loses nothing, invalid UTF-8 included). A crash, a sanitizer report,
// an exception or a round trip that changes the text is a finding.
//   scripts/fuzz-text tokenizer [SECONDS]
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tests/fuzz/fuzz_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tps::Tokenizer& t = tps::fuzz::tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool parse_special : {false, true})
    if (t.decode(t.encode(text, parse_special)) != text) std::abort();
  return 0;
}
