#include "launch/cli.h"

#include <cctype>
#include <cstdio>
#include <new>

#include "runtime/build_info.h"
#include "runtime/error.h"

namespace tps {

const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      try {
        size_t used = 0;
        long long v = std::stoll(value, &used);
        if (used == value.size() && v >= 1) return "";
      } catch (const std::exception&) {
      }
      return "got '" + value + "', expected an integer >= 1";
    },
    "INT>=1");

void add_version_flag(CLI::App& app, const std::function<std::string()>& details) {
  app.set_version_flag(
      "--version", [&app, details] { return version_line(app.get_name()) + (details ? "\n" + details() : ""); },
      "print the version, the build and what this machine gives it, and exit");
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::printf("%s\n", e.what());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (see %s --help)\n", app.get_name().c_str(), e.what(), app.get_name().c_str());
    return 2;
  }
  return std::nullopt;
}

int run_tool(const std::string& name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), kOutOfMemory);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

std::optional<SizeText> parse_size(const std::string& text) {
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string unit = text.substr(used);
  const int shift = unit.empty()                   ? 0
                    : unit == "K" || unit == "KiB" ? 10
                    : unit == "M" || unit == "MiB" ? 20
                    : unit == "G" || unit == "GiB" ? 30
                                                   : -1;
  if (!std::isdigit(static_cast<unsigned char>(text[0])) || n == 0 || shift < 0 || n > (1ull << 40))
    return std::nullopt;
  return SizeText{static_cast<uint64_t>(n) << shift, shift > 0};
}

}  // namespace tps
