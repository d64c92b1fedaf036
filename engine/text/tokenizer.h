// Byte-level BPE for the o200k_harmony vocabulary (spec §5): the o200k split
// pattern through PCRE2 (Unicode properties, JIT), merges from the GGUF's
// merge list, special tokens recognised in text only when asked, and
// decoding back to bytes exactly.
//
// Merge order is tiktoken's: among adjacent pairs, the one making the token
// of lowest rank merges first, leftmost on ties. A token's rank is the index
// of the first merge that makes it -- a merge list converted from tiktoken
// ranks lists every split of a token and orders merges by the token made, so
// this is tiktoken's rank order, and for lists with one merge per token it
// is llama.cpp's per-merge order.
//
// Invalid UTF-8 in the input is not an error and is kept byte-exact, so
// decode(encode(x)) == x for every byte string: each run of bytes that are
// not valid UTF-8 (PCRE2_MATCH_INVALID_UTF: stray continuation bytes,
// truncated sequences, overlong forms, surrogates, code points past
// U+10FFFF) is a piece of its own, byte-level BPE-encoded, and the valid text
// on either side is split as if the run were the end or the start of the
// text. tiktoken never sees such bytes (it takes Unicode strings; its callers
// turn invalid input into U+FFFD first), so this is tps's own definition; on
// valid UTF-8 the result is tiktoken's.
//
// Known difference: PCRE2 knows the Unicode of its version (10.42 in Debian
// 12: Unicode 14) and tiktoken's Rust regex a later one (16 or newer), so
// letters, marks and digits assigned after Unicode 14 (CJK extensions H and
// I, Egyptian hieroglyphs extension A, ...) are unassigned here and split as
// symbols. Everything else matched tiktoken on 450,000 random strings of
// arbitrary code points.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/text/flat_table.h"

namespace tps {

class GgufFile;

class Tokenizer {
 public:
  // tokens/types/merges as tokenizer.ggml.{tokens,token_type,merges}; the
  // views are only read during construction. Control (3) and user-defined (4)
  // tokens are literal text ("<|start|>"), every other token GPT-2 byte-level
  // text; types may be empty (all ordinary). Throws InputError for a
  // vocabulary that is not byte-level BPE.
  Tokenizer(std::span<const std::string_view> tokens, std::span<const int32_t> types,
            std::span<const std::string_view> merges);
  // Reads the arrays from the file; throws InputError naming the file if the
  // tokenizer is not a GPT-2 style byte-level BPE.
  static Tokenizer from_gguf(const GgufFile& file);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) = delete;

  // parse_special: control and user-defined tokens written as text
  // ("<|start|>") become their ids, the longest one first where several
  // match at the same place; otherwise they are ordinary text.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = false) const;
  // The bytes of the tokens, concatenated; throws InputError for an unknown id.
  std::string decode(std::span<const int32_t> ids) const;
  // The bytes of one token (may be part of a UTF-8 character); throws
  // InputError naming the id and the vocabulary size for an unknown id.
  const std::string& token_bytes(int32_t id) const;
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  bool is_control(int32_t id) const;
  std::optional<int32_t> special_id(std::string_view text) const;
  // Makes encoding's tables now instead of at the first encode (below): a
  // server's first request should not wait for them.
  void prepare_encoding() const { encoder(); }

 private:
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
  struct Special {
    int32_t id;
    size_t length;
  };
  // The longest special token written at text[at], if any.
  std::optional<Special> special_at(std::string_view text, size_t at) const;

  struct Merge {
    uint32_t rank;  // index of the first merge that makes `result`
    int32_t result;
  };
  // The maps' keys view the strings in bytes_; moving the vector keeps them
  // in place (the moved-to vector takes over the same elements).
  std::vector<std::string> bytes_;                         // id -> raw bytes
  std::vector<uint8_t> control_;                           // id -> control/user-defined
  FlatTable<std::string_view, int32_t> id_of_bytes_;       // ordinary tokens
  std::unordered_map<std::string_view, int32_t> special_;  // control token text -> id
  std::vector<size_t> special_lengths_;                    // distinct lengths of special_'s keys, longest first
  std::array<bool, 256> special_start_{};                  // first bytes of special_'s keys
  std::array<int32_t, 256> byte_token_{};
  // What only encoding needs -- the merge table, (left << 32 | right) ->
  // merge, and the compiled pre-tokenizer pattern -- made at the first
  // encode from the merges' text kept as one string: most processes that
  // load a model never encode (every rank but the one that reads prompts,
  // tools given token ids), and the table is most of a small model's start
  // (0.2 of 0.26 s for o200k's 446,189 merges).
  struct Encoder;
  const Encoder& encoder() const;
  std::unique_ptr<Encoder> encoder_;
};

// Turns token bytes into printable text as they stream out: a multi-byte
// character split across tokens is held back until it is complete, and bytes
// that cannot become a character (invalid UTF-8) are shown as U+FFFD, one per
// maximal invalid sequence as Unicode recommends -- so the output is always
// valid UTF-8, while decode() keeps the raw bytes.
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  // At the end: a character still incomplete becomes one U+FFFD.
  std::string flush();

 private:
  std::string pending_;  // an incomplete but so far valid character
};

}  // namespace tps
