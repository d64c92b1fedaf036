// libFuzzer target for the server's request parser: any body either parses
// as bounded JSON (parse_request_body) and then as a chat request (rendered
// as the harmony prompt the server would run) or a completion request, or is
// refused with an ApiError (what the server answers 400 with). A crash, a
// sanitizer report or any other exception (a 500) is a finding.
//   scripts/fuzz-text request [SECONDS]
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "engine/text/harmony.h"
#include "serve/chat/chat_request.h"
#include "serve/http/api_error.h"
#include "tests/fuzz/fuzz_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::ordered_json body;
  try {
    body = tps::parse_request_body(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const tps::ApiError&) {
    return 0;
  }
  const tps::ApiLimits limits{"gpt-oss-20b", 4096};
  const tps::Tokenizer& t = tps::fuzz::tokenizer();
  try {
    const tps::ChatRequest r = tps::parse_chat_request(body, limits);
    tps::render_conversation(r.conversation, [&t](const std::string& s) { return t.encode(s); });
  } catch (const tps::ApiError&) {
  }
  try {
    t.encode(tps::parse_completion_request(body, limits).prompt, true);
  } catch (const tps::ApiError&) {
  }
  return 0;
}
