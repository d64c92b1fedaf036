// Errors that carry their context. Library code throws tps::Error with a
// message that names the file, field or value and what was expected; the
// program's entry point (launch/) catches it, prints one line, and exits --
// under MPI through runtime/mpi_session, which ends every rank.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tps {

// Concatenates its arguments with operator<< (g++ 12 has no <format>).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// A failure with a message fit for a user. exit_code follows the tools'
// convention: 2 for bad input (arguments, files, descriptions), 1 otherwise.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = 1) : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// What an entry point says when an allocation fails (std::bad_alloc).
inline constexpr const char* kOutOfMemory =
    "out of memory: an allocation failed (the process's memory limit, or its NUMA node's free "
    "memory, is too small for this model and these options)";

// Bad input from the user: exit code 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(message, 2) {}
};

// Flushes standard output; throws Error ("standard output: <reason>") when
// what the program printed could not all be written (a full disk, a closed
// pipe): output lost must not end with exit 0.
inline void flush_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw Error(cat("standard output: ", errno ? std::strerror(errno) : "write failed"));
}

}  // namespace tps
