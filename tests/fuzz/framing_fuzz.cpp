// libFuzzer target for where a request ends (serve/http/request_framing.h): any
// bytes (after the first, which sets the body bound) end in the same state
// fed whole as fed a byte at a time, as a trickling client sends them, with
// the same request or refusal; a request handed on is framed again whole
// and unchanged. A crash, a sanitizer report or a difference is a finding.
//   scripts/fuzz-text framing [SECONDS]
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "serve/http/request_framing.h"

using tps::RequestFramer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t max_body = 16 + data[0];  // small: the fuzzer reaches it
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  RequestFramer whole(max_body), trickled(max_body);
  const RequestFramer::State state = whole.feed(bytes);
  RequestFramer::State step = RequestFramer::State::incomplete;
  for (size_t n = 1; n <= bytes.size() && step == RequestFramer::State::incomplete; ++n)
    step = trickled.feed(bytes.substr(0, n));
  if (step != state) std::abort();
  if (state == RequestFramer::State::refused && trickled.status() != whole.status()) std::abort();
  if (state != RequestFramer::State::complete) return 0;
  if (trickled.size() != whole.size() || trickled.request() != whole.request() || whole.size() > bytes.size())
    std::abort();
  RequestFramer again(max_body);
  if (again.feed(whole.request()) != RequestFramer::State::complete || again.request() != whole.request() ||
      again.size() != whole.request().size())
    std::abort();
  return 0;
}
