#include "runtime/build_info.h"

#include "build_commit.h"  // generated (cmake/git_commit.cmake): TPS_GIT_COMMIT

namespace tps {

const BuildInfo& build_info() {
  static const BuildInfo info {
    TPS_VERSION, TPS_GIT_COMMIT,
#if defined(__clang__)
        "clang " __clang_version__,
#else
        "g++ " __VERSION__,
#endif
        TPS_BUILD_TYPE
  };
  return info;
}

std::string version_line(const std::string& tool) {
  const BuildInfo& b = build_info();
  return tool + " " + b.version + " (commit " + b.commit + ", " + b.build_type + ", " + b.compiler + ")";
}

}  // namespace tps
