// Logging to stderr. stdout is reserved for what the user asked for
// (generated text, JSON); everything else goes here, one line at a time,
// each starting with the tool's name ("tpsrun: ..."), and with the rank on
// ranks other than 0 ("tpsrun[2]: ..."): rank 0 speaks for the job.
#pragma once

#include <string>

#include "runtime/error.h"

namespace tps {

enum class LogLevel { quiet = 0, info = 1, debug = 2 };

// Set once at start-up by the entry point, before threads start; the rank
// once MPI is up (runtime/mpi_session).
void log_configure(const std::string& tool, LogLevel level);
void log_set_rank(int rank, int world_size);
LogLevel log_level();
const std::string& log_tool();  // "tps" unless configured
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
