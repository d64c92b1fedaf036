// JSON on stdout, as every tool prints it: one object, indented for a
// terminal and on one line for a pipe or a file (one object per line);
// strings that are not valid UTF-8 (a token's piece of a character) with
// U+FFFD in place of the bad bytes rather than an exception.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

namespace tps {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline void print_json(const nlohmann::json& j) {
  const std::string text = json_text(j, isatty(STDOUT_FILENO) ? 2 : -1);
  std::printf("%s\n", text.c_str());
}

}  // namespace tps
