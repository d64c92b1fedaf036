// A file name in the temporary directory that no other test process uses.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace tps::testing {

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tps-" + std::to_string(getpid()) + "-" + name)).string();
}

}  // namespace tps::testing
