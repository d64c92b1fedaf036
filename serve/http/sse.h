// One server-sent event, as every streaming API writes it: "event: NAME"
// when the API names its events (the Responses API does, chat completions
// do not), then the JSON on one "data:" line, then the blank line that ends
// the event. Bytes that are not UTF-8 become U+FFFD (runtime/json_text.h):
// a stream cannot take back a chunk it has sent.
#pragma once

#include <string>
#include <string_view>

#include "runtime/json_text.h"

namespace tps {

template <class Json>
std::string sse_event(const Json& data, std::string_view event_name = "") {
  std::string out;
  if (!event_name.empty()) out.append("event: ").append(event_name).append("\n");
  return out.append("data: ").append(json_text(data)).append("\n\n");
}

}  // namespace tps
