// libFuzzer target for reading model output: the input is a sequence of
// token ids, 2 bytes each (little-endian v: ordinary token v below 0xf000,
// else the special token 199998 + (v - 0xf000) % 1090, so that harmony's
// control tokens are common), given to the chat text tpsrun shows (GeneratedText, with
// and without the analysis channel) and to the server's ChatText (harmony
// channels, tool calls, a stop string). Whatever the model says, the text
// they return is whole UTF-8 and nothing throws; anything else is a finding.
//   scripts/fuzz-text harmony [SECONDS]
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/text/generated_text.h"
#include "serve/chat/chat_text.h"
#include "tests/fuzz/fuzz_tokenizer.h"

namespace {

bool whole_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

void check(const std::string& s) {
  if (!whole_utf8(s)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tps::Tokenizer& t = tps::fuzz::tokenizer();
  tps::GeneratedText plain({true, false}), analysis({true, true});
  tps::ChatText response(t, true, {"STOP"}, -1, "call_");
  for (size_t i = 0; i + 1 < size; i += 2) {
    tps::Pick p;
    const int v = data[i] | data[i + 1] << 8;
    p.id = v < 0xf000 ? v : 199998 + (v - 0xf000) % 1090;
    check(plain.accept(p.id, t));
    check(analysis.accept(p.id, t));
    const tps::ChatText::Delta d = response.push(p);
    check(d.reasoning), check(d.content), check(d.arguments);
  }
  const tps::ChatText::Delta d = response.finish();
  check(d.content), check(d.reasoning);
  check(plain.flush()), check(analysis.flush());
  return 0;
}
