// Rank-prefixed logging to stderr. stdout is reserved for what the user asked
// for (generated text, JSON); everything else goes here.
#pragma once

#include <string>

#include "runtime/error.h"

namespace tps {

enum class LogLevel { quiet = 0, info = 1, debug = 2 };

// Set once at start-up by the entry point, before threads start. The rank
// prefix is printed only when there is more than one rank.
void log_configure(LogLevel level, int rank, int world_size);
LogLevel log_level();
void log_line(const std::string& line);

template <typename... Args>
void log_info(const Args&... args) {
  if (log_level() >= LogLevel::info) log_line(cat(args...));
}
template <typename... Args>
void log_debug(const Args&... args) {
  if (log_level() >= LogLevel::debug) log_line(cat(args...));
}
template <typename... Args>
void log_warn(const Args&... args) {
  if (log_level() >= LogLevel::info) log_line(cat("warning: ", args...));
}

}  // namespace tps
