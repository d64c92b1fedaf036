// A request's members read without trusting their types: nlohmann's
// value(key, default) throws a type_error when the member exists with another
// type, which the server would answer with a 500; these give the fallback.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tps {

inline std::string string_field(const nlohmann::ordered_json& j, const char* key, const std::string& fallback = "") {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

inline bool bool_field(const nlohmann::ordered_json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace tps
