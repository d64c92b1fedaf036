// The o200k_harmony vocabulary in the form llama.cpp's GGUF files store it,
// built from the real o200k_base ranks that the npm package `tiktoken` ships
// (encoders/o200k_base.json; scripts/install-deps installs it). The
// synthetic model writer puts it into every file it makes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tps {

struct Vocab {
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens: GPT-2 byte-level text
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type: 1 normal, 3 control
  std::vector<std::string> merges;   // tokenizer.ggml.merges: "A B", by priority
  uint32_t bos = 199998, eos = 200002, pad = 199999;
};

// Tokens 0..199997 are the o200k ranks (rank = id); 199998..201087 are the
// harmony special tokens (spec §5.1) and reserved names. Merges follow the
// Hugging Face conversion of tiktoken ranks that llama.cpp's converter
// reads: for each token in rank order, every split into two tokens, ordered
// by the ranks of the left and then the right piece (446,189 for o200k).
// Throws InputError naming the file if it is missing, not a regular file
// (runtime/mapped_file.h: a FIFO is never opened to wait) or malformed.
Vocab build_o200k_harmony_vocab(const std::string& o200k_base_json);

// The o200k_harmony special token names by id (199998..201087).
std::string harmony_special_name(uint32_t id);

// Where this build's scripts/install-deps put tiktoken's o200k_base.json
// (tests/reference/node_modules/...): the default of the tools that build
// the vocabulary. Written by cmake into a generated source of its own, so
// that no compile line holds the tree's absolute path (CMakeLists.txt,
// TPS_CCACHE).
const char* default_o200k_json();

}  // namespace tps
