// Byte-level BPE for the o200k_harmony vocabulary (spec §5): the o200k
// split pattern through PCRE2 (Unicode properties, JIT), merges by rank from
// the GGUF's merge list, special tokens recognised in text only when asked,
// and decoding back to bytes exactly.
//
// Invalid UTF-8 in the input is not an error: the bytes the pattern cannot
// match (PCRE2_MATCH_INVALID_UTF) become pieces of their own, encoded as
// byte tokens, so decode(encode(x)) == x for every byte string. tiktoken
// never sees such input (it takes Unicode strings).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tps {

class GgufFile;

class Tokenizer {
 public:
  // tokens/types/merges as tokenizer.ggml.{tokens,token_type,merges}.
  Tokenizer(std::span<const std::string_view> tokens, std::span<const int32_t> types,
            std::span<const std::string_view> merges);
  // Reads the arrays from the file; throws InputError naming the file if the
  // tokenizer is not a GPT-2 style byte-level BPE.
  static Tokenizer from_gguf(const GgufFile& file);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) = delete;

  // parse_special: control tokens written as text ("<|start|>") become their
  // ids; otherwise they are ordinary text.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = false) const;
  std::string decode(std::span<const int32_t> ids) const;
  // The bytes of one token; throws InputError for an id outside the vocabulary.
  const std::string& token_bytes(int32_t id) const;
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  bool is_control(int32_t id) const;
  std::optional<int32_t> special_id(std::string_view text) const;

 private:
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;

  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  std::vector<std::string> bytes_;                    // id -> raw bytes
  std::vector<uint8_t> control_;                      // id -> control/user-defined
  std::unordered_map<std::string_view, int32_t> id_of_bytes_;  // ordinary tokens
  std::unordered_map<std::string_view, int32_t> special_;      // control token text -> id
  std::unordered_map<uint64_t, Merge> merges_;        // (left << 32 | right) -> merge
  int32_t byte_token_[256];
  struct Regex;
  std::unique_ptr<Regex> regex_;
};

// Turns token bytes into printable text as they stream out: a multi-byte
// character split across tokens is held back until it is complete.
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  // What remains at the end (an incomplete character) as U+FFFD.
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace tps
