#include "launch/cli.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <new>

#include "runtime/build_info.h"
#include "runtime/error.h"
#include "runtime/mpi_session.h"

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

const CLI::Validator kSeed(
    [](std::string& value) -> std::string {
      try {
        size_t used = 0;
        std::stoull(value, &used);
        if (used == value.size() && std::isdigit(static_cast<unsigned char>(value[0]))) return "";
      } catch (const std::exception&) {
      }
      return "got '" + value + "', expected an integer in 0..18446744073709551615";
    },
    "UINT64");

CLI::Validator positive_number(double max, const std::string& unit, const std::string& type_name) {
  return CLI::Validator(
      [max, unit](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(value, &used);
          if (used == value.size() && std::isfinite(v) && v > 0 && v <= max) return "";
        } catch (const std::exception&) {
        }
        return cat("got '", value, "', expected ", unit, " above 0 and at most ", max);
      },
      type_name);
}

CLI::Validator positive_seconds(double max) { return positive_number(max, "seconds", "SECONDS"); }

namespace {

// CLI11 turns an empty value into the type's zero; no tps option means that.
void refuse_empty_values(CLI::App& app) {
  static const CLI::Validator not_empty(
      [](std::string& value) -> std::string { return value.empty() ? "got an empty value" : ""; }, "");
  for (CLI::Option* option : app.get_options())
    if (option->get_type_size() != 0 && !option->get_name().empty() && option->get_name() != "--help")
      option->check(not_empty);
  for (CLI::App* sub : app.get_subcommands({})) refuse_empty_values(*sub);
}

}  // namespace

void add_version_flag(CLI::App& app, const std::function<std::string()>& details) {
  app.set_version_flag(
      "--version", [&app, details] { return version_line(app.get_name()) + (details ? "\n" + details() : ""); },
      "print the version, the build and what this machine gives it, and exit");
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  // Every rank of an mpirun job sees the same command line: one answers.
  const bool speak = launcher_rank() == 0;
  refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (speak) std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    if (speak) std::printf("%s\n", e.what());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    if (speak) std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    if (speak)
      std::fprintf(stderr, "%s: %s (see %s --help)\n", app.get_name().c_str(), e.what(), app.get_name().c_str());
    return 2;
  }
  return std::nullopt;
}

int run_tool(const std::string& name, const std::function<int()>& body) {
  try {
    const int code = body();
    flush_stdout();
    return code;
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

std::optional<SizeText> parse_size(const std::string& text, const std::string& flag) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  size_t used = 0;
  unsigned long long n = 0;
  bool too_large = false;
  try {
    n = std::stoull(text, &used);
  } catch (const std::out_of_range&) {
    too_large = true;
    used = text.find_first_not_of("0123456789");
    if (used == std::string::npos) used = text.size();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string unit = text.substr(used);
  const int shift = unit.empty()                   ? 0
                    : unit == "K" || unit == "KiB" ? 10
                    : unit == "M" || unit == "MiB" ? 20
                    : unit == "G" || unit == "GiB" ? 30
                                                   : -1;
  if (shift < 0 || (n == 0 && !too_large)) return std::nullopt;
  if (too_large || n > (~0ull >> shift))
    throw InputError(
        cat(flag, " ", text, ": more than 2^64 - 1", shift ? " bytes" : "", ", more than any size can be"));
  return SizeText{static_cast<uint64_t>(n) << shift, shift > 0};
}

}  // namespace tps
