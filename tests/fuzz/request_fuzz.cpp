// libFuzzer target for the server's request parser: any body either parses
// as JSON and then as a chat request (rendered as the harmony prompt the
// server would run) or a completion request, or is refused with the JSON
// parser's or an ApiError (what the server answers 400 with). A crash, a
// sanitizer report or any other exception (a 500) is a finding.
//   scripts/fuzz-text request [SECONDS]
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "engine/text/harmony.h"
#include "serve/api_error.h"
#include "serve/api_request.h"
#include "tests/fuzz/fuzz_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
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
