#include "serve/api/generation_request.h"

#include "runtime/error.h"
#include "serve/api/request_fields.h"

namespace tps {

using json = nlohmann::ordered_json;

void check_prompt_bytes(size_t bytes, const ApiLimits& limits, const std::string& param) {
  if (bytes > limits.prompt_bytes())
    throw ApiError(400,
                   cat("the prompt is ", bytes, " bytes; the context holds ", limits.context, " tokens of at most ",
                       limits.longest_token, " bytes"),
                   param, "invalid_request_error", "context_length_exceeded");
}

json parse_request_body(std::string_view text) {
  size_t values = 0;
  std::vector<size_t> members;  // of each object open, innermost last
  const json::parser_callback_t bounded = [&](int depth, json::parse_event_t event, json&) {
    using Event = json::parse_event_t;  // an alias: clang takes no `using enum` of it
    const bool opens = event == Event::object_start || event == Event::array_start;
    if (opens && depth >= kMaxBodyDepth)
      throw bad_param("", cat("the body nests arrays and objects deeper than ", kMaxBodyDepth, " levels"));
    if ((opens || event == Event::value) && ++values > kMaxBodyValues)
      throw bad_param("", cat("the body holds more than ", kMaxBodyValues, " JSON values"));
    if (event == Event::object_start) members.push_back(0);
    if (event == Event::object_end) members.pop_back();
    if (event == Event::key && ++members.back() > kMaxObjectMembers)
      throw bad_param("", cat("an object of the body has more than ", kMaxObjectMembers, " members"));
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), bounded);
  } catch (const json::exception& e) {  // a syntax error, or a number past a double's range (out_of_range)
    throw bad_param("", cat("the body is not valid JSON: ", e.what()));
  }
}

}  // namespace tps
