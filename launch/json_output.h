// JSON on stdout, as every tool prints it: one object, indented for a
// terminal and on one line for a pipe or a file (one object per line);
// strings that are not valid UTF-8 (a token's piece of a character) with
// U+FFFD in place of the bad bytes rather than an exception.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/json_text.h"

namespace tps {

inline void print_json(const nlohmann::json& j) {
  const std::string text = json_text(j, isatty(STDOUT_FILENO) ? 2 : -1);
  std::printf("%s\n", text.c_str());
}

}  // namespace tps
