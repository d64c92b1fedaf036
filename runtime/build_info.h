// What a bug report needs to name this build: the version (the project's
// CMake VERSION), the git commit it was built from ("-modified" when the
// checkout had uncommitted changes), the compiler and the build type.
#pragma once

#include <string>

namespace tps {

struct BuildInfo {
  const char* version;
  const char* commit;
  const char* compiler;
  const char* build_type;
};
const BuildInfo& build_info();

// "NAME VERSION (commit C, BUILD_TYPE, COMPILER)": the first line of every
// tool's --version.
std::string version_line(const std::string& tool);

}  // namespace tps
