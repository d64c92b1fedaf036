// `tpsrun tokenize`: the model's tokenizer on a text, as llama.cpp's
// llama-tokenize prints it, so users can check tokenization themselves.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tps {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string file;
  bool json = false;
  bool ids_only = false;
  bool parse_special = true;
};

// `tpsrun tokenize` and its options, into options.
CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& options);

// Prints to stdout; throws InputError for a missing file or model.
int run_tokenize(const TokenizeOptions& options);

}  // namespace tps
