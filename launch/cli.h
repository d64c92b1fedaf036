// Shared command-line conventions of the tps tools (CLI11 from Debian:
// declarative options, generated --help, subcommands; no hand-written parser).
//   exit 0: success or --help;  exit 2: bad input, with one line on stderr
//   naming the option/file/value;  exit 1: other failures.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

namespace tps {

// Accepts integers >= 1 with a message that says so.
extern const CLI::Validator kPositive;

// Accepts a seed: an integer in 0..2^64-1 (no sign, no wrap-around).
extern const CLI::Validator kSeed;

// Accepts a number above 0 and at most `max`, in `unit` (named in the
// message: "expected GB/s above 0 and at most 1e+06"): finite (a range
// check alone, CLI::Range, lets nan through, whose every comparison is
// false).
CLI::Validator positive_number(double max, const std::string& unit, const std::string& type_name);
// positive_number in seconds.
CLI::Validator positive_seconds(double max);

// --version: the build (version_line) and the lines details() gives, e.g.
// the kernels, MPI and hwloc a tool runs with.
void add_version_flag(CLI::App& app, const std::function<std::string()>& details = nullptr);

// Parses argv into app, refusing an empty value for any option. Returns an exit code when the program should stop
// now (--help printed: 0; a usage error printed as one line: 2).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// Runs body, turning tps::Error (and other exceptions) into one line on stderr
// and the error's exit code. For tools that do not run under MPI.
int run_tool(const std::string& name, const std::function<int()>& body);

// A count with an optional binary unit (K, M, G, or KiB, MiB, GiB): its
// value and whether it had a unit; nullopt for anything else (no digits,
// zero, another suffix). A count that does not fit 64 bits with its unit
// (99999999999999999999, 17179869184G) throws InputError naming `flag`:
// it must never wrap into a small one.
struct SizeText {
  uint64_t value;
  bool has_unit;
};
std::optional<SizeText> parse_size(const std::string& text, const std::string& flag);

}  // namespace tps
