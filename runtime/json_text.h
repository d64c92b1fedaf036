// A JSON value as one line of text, the way every answer and every tool
// prints it: strings that are not valid UTF-8 (a token's piece of a
// character, a client's bad bytes) with U+FFFD in place of the bad bytes
// rather than the exception nlohmann's dump() throws by default.
// Header-only: runtime links no JSON library; the rooms that call this do
// (nlohmann-json, Debian's nlohmann-json3-dev).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

namespace tps {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A template for the ordered form, so that a plain value (a string) still
// converts to nlohmann::json alone and is not ambiguous between the two.
template <class Json>
requires std::is_same_v<Json, nlohmann::ordered_json> std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tps
