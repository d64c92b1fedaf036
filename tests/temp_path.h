// A file name in the temporary directory that no other test process uses,
// and one that takes what is there with it when its test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace tps::testing {

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tps-" + std::to_string(getpid()) + "-" + name)).string();
}

// temp_path(name), removed (with anything under it) when it goes out of
// scope, however the test ended.
struct ScopedTempPath {
  explicit ScopedTempPath(const std::string& name) : path(temp_path(name)) {}
  ~ScopedTempPath() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScopedTempPath(const ScopedTempPath&) = delete;
  ScopedTempPath& operator=(const ScopedTempPath&) = delete;
  const std::string path;
};

}  // namespace tps::testing
