#include "engine/text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <queue>

#include "engine/gguf/gguf_reader.h"
#include "engine/text/byte_level.h"
#include "runtime/error.h"

namespace tps {
namespace {

// The o200k pre-tokenizer pattern (spec §5.2), identical in o200k_harmony,
// with \s written as \p{White_Space}: tiktoken's Rust regex means exactly
// that by \s, while PCRE2's \s also takes U+180E MONGOLIAN VOWEL SEPARATOR
// (a space before Unicode 6.3, a format character since).
constexpr const char* kPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^\\p{White_Space}\\p{L}\\p{N}]+[\\r\\n/]*"
    "|\\p{White_Space}*[\\r\\n]+"
    "|\\p{White_Space}+(?!\\P{White_Space})"
    "|\\p{White_Space}+";

constexpr int32_t kTypeNormal = 1, kTypeControl = 3, kTypeUserDefined = 4;
constexpr uint32_t kNoMerge = std::numeric_limits<uint32_t>::max();
constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

struct Regex {
  pcre2_code* code = nullptr;
  Regex() {
    int err = 0;
    PCRE2_SIZE offset = 0;
    // PCRE2_MATCH_INVALID_UTF: invalid UTF-8 is matched by nothing instead of
    // failing the whole call, and the subject is not validated up front on
    // every call (which would make splitting a long text quadratic).
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
    if (!code)
      throw Error(cat("tokenizer: cannot compile the split pattern at offset ", offset, ": ", pcre2_message(err)));
    // Without JIT support in the library pcre2_match interprets the pattern:
    // the same matches, only slower.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
  ~Regex() { pcre2_code_free(code); }
};

// A run of strings in one allocation: copies of the views the constructor
// was given, for the first encode.
struct StringRun {
  std::string bytes;
  std::vector<size_t> ends;
  void push(std::string_view s) { bytes.append(s), ends.push_back(bytes.size()); }
  size_t size() const { return ends.size(); }
  std::string_view operator[](size_t i) const {
    const size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(bytes).substr(begin, ends[i] - begin);
  }
};

}  // namespace

struct Tokenizer::Encoder {
  std::once_flag made;
  StringRun token_text;                  // the ordinary tokens' vocabulary text ...
  std::vector<int32_t> token_id;         // ... and their ids
  StringRun merge_text;                  // every merge, "A B", in order
  FlatTable<uint64_t, Merge> merges{0};  // (left << 32 | right) -> merge
  std::unique_ptr<Regex> regex;
};

Tokenizer::Tokenizer(std::span<const std::string_view> tokens, std::span<const int32_t> types,
                     std::span<const std::string_view> merges)
    : id_of_bytes_(tokens.size()), encoder_(std::make_unique<Encoder>()) {
  const size_t n = tokens.size();
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw InputError(cat("tokenizer: ", n, " tokens is more than 32-bit ids can number"));
  if (!types.empty() && types.size() != n)
    throw InputError(cat("tokenizer: ", types.size(), " token types for ", n,
                         " tokens (tokenizer.ggml.token_type must have one per token)"));
  bytes_.resize(n);
  control_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const int32_t type = types.empty() ? kTypeNormal : types[i];
    if (type == kTypeControl || type == kTypeUserDefined) {
      control_[i] = 1;
      bytes_[i] = tokens[i];
      // An empty special would match everywhere; it can only be decoded.
      if (!bytes_[i].empty()) special_.emplace(bytes_[i], id);
      continue;
    }
    std::optional<std::string> raw = vocab_text_to_bytes(tokens[i]);
    if (!raw)
      throw InputError(cat("tokenizer.ggml.tokens[", i, "] is not GPT-2 byte-level text (type ", type,
                           "): not a byte-level BPE vocabulary"));
    bytes_[i] = std::move(*raw);
    // Unknown, unused and byte tokens decode, but encoding never makes them.
    if (type == kTypeNormal) {
      id_of_bytes_.insert(bytes_[i], id);
      encoder_->token_text.push(tokens[i]);
      encoder_->token_id.push_back(id);
    }
  }
  for (const auto& [text, id] : special_) {
    special_start_[static_cast<unsigned char>(text[0])] = true;
    if (std::find(special_lengths_.begin(), special_lengths_.end(), text.size()) == special_lengths_.end())
      special_lengths_.push_back(text.size());
  }
  std::sort(special_lengths_.rbegin(), special_lengths_.rend());
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    const int32_t* id = id_of_bytes_.find(std::string_view(&byte, 1));
    if (!id)
      throw InputError(
          cat("tokenizer: the vocabulary has no ordinary token for byte ", b, " (not a byte-level BPE vocabulary)"));
    byte_token_[b] = *id;
  }

  // The merges are checked now and made into a table at the first encode.
  for (size_t r = 0; r < merges.size(); ++r) {
    if (merges[r].find(' ') == std::string_view::npos)  // byte-level text has no spaces ("Ġ" is the space byte)
      throw InputError(cat("tokenizer.ggml.merges[", r, "] has no space (expected \"A B\")"));
    encoder_->merge_text.push(merges[r]);
  }
}

const Tokenizer::Encoder& Tokenizer::encoder() const {
  Encoder& e = *encoder_;
  std::call_once(e.made, [&] {
    e.regex = std::make_unique<Regex>();
    // Vocabulary text -> id of the ordinary tokens: merges name their pieces so.
    FlatTable<std::string_view, int32_t> id_of_text(e.token_id.size());
    for (size_t i = 0; i < e.token_id.size(); ++i) id_of_text.insert(e.token_text[i], e.token_id[i]);
    // A merge's priority is its token's rank: the index of the first merge
    // that makes that token (see tokenizer.h).
    e.merges = FlatTable<uint64_t, Merge>(e.merge_text.size());
    std::vector<uint32_t> rank_of_token(bytes_.size(), kNoMerge);
    std::string joined;
    for (size_t r = 0; r < e.merge_text.size(); ++r) {
      const std::string_view m = e.merge_text[r];
      const size_t space = m.find(' ');
      const std::string_view left_text = m.substr(0, space), right_text = m.substr(space + 1);
      const int32_t *left = id_of_text.find(left_text), *right = id_of_text.find(right_text);
      joined.assign(left_text).append(right_text);
      const int32_t* result = id_of_text.find(joined);
      // A merge whose pieces or product are not tokens can never apply.
      if (!left || !right || !result) continue;
      uint32_t& rank = rank_of_token[*result];
      if (rank == kNoMerge) rank = static_cast<uint32_t>(r);
      e.merges.insert(pair_key(*left, *right), Merge{rank, *result});
    }
    e.token_text = {}, e.merge_text = {}, e.token_id = {};  // made: the copies go
  });
  return e;
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_gguf(const GgufFile& f) {
  std::optional<std::string_view> model = f.find_string("tokenizer.ggml.model");
  if (model != "gpt2")
    throw InputError(cat(f.path(), ": tokenizer.ggml.model is '", model.value_or("(missing)"),
                         "' (tps reads GPT-2 style byte-level BPE: 'gpt2')"));
  std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens");
  std::vector<int32_t> types;
  if (f.find("tokenizer.ggml.token_type")) types = f.get_i32_array("tokenizer.ggml.token_type");
  std::vector<std::string_view> merges = f.get_string_array("tokenizer.ggml.merges");
  try {
    return Tokenizer(tokens, types, merges);
  } catch (const InputError& e) {
    throw InputError(cat(f.path(), ": ", e.what()));
  }
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw InputError(cat("token id ", id, " is outside the vocabulary of ", vocab_size(), " tokens (ids 0..",
                         vocab_size() - 1, ")"));
  return bytes_[id];
}

bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < vocab_size() && control_[id]; }

std::optional<int32_t> Tokenizer::special_id(std::string_view text) const {
  auto it = special_.find(text);
  if (it == special_.end()) return std::nullopt;
  return it->second;
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (const int32_t* id = id_of_bytes_.find(piece)) {
    out.push_back(*id);  // the whole piece is a token (tiktoken looks this up first too)
    return;
  }
  const FlatTable<uint64_t, Merge>& merges = encoder().merges;
  // Merge the adjacent pair of lowest rank until none applies; a heap of
  // candidate pairs keeps long pieces O(n log n). Parts form a linked list.
  struct Part {
    int32_t id;
    int prev, next;
  };
  std::vector<Part> parts(piece.size());
  for (size_t i = 0; i < piece.size(); ++i)
    parts[i] = {byte_token_[static_cast<unsigned char>(piece[i])], static_cast<int>(i) - 1,
                i + 1 < piece.size() ? static_cast<int>(i + 1) : -1};
  struct Candidate {
    uint32_t rank;
    int left;
    int32_t left_id, right_id, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left) {
    if (left < 0 || parts[left].next < 0) return;
    const int right = parts[left].next;
    if (const Merge* m = merges.find(pair_key(parts[left].id, parts[right].id)))
      heap.push({m->rank, left, parts[left].id, parts[right].id, m->result});
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i) consider(static_cast<int>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Part& l = parts[c.left];
    // Stale: one of the two parts has merged with something else since.
    if (l.id != c.left_id || l.next < 0 || parts[l.next].id != c.right_id) continue;
    const int right = l.next;
    l.id = c.result;
    l.next = parts[right].next;
    if (l.next >= 0) parts[l.next].prev = c.left;
    parts[right].id = -1;
    consider(l.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = parts[i].next) out.push_back(parts[i].id);
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  const Regex& regex = *encoder().regex;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(regex.code, nullptr), &pcre2_match_data_free);
  if (!md) throw Error("tokenizer: out of memory for PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(regex.code, subject, text.size(), pos, 0, md.get(), nullptr);
    size_t start = text.size(), end = text.size();  // no match: the rest is invalid UTF-8
    if (rc > 0) {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      start = ov[0], end = ov[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
      throw Error(cat("tokenizer: splitting failed at byte ", pos, " of ", text.size(), ": ", pcre2_message(rc)));
    }
    // Valid UTF-8 is always matched (the alternatives cover every character),
    // so what the match skipped is a run of invalid bytes: a piece of its own.
    if (start > pos) encode_piece(text.substr(pos, start - pos), out);
    if (end > start) encode_piece(text.substr(start, end - start), out);
    pos = end;
  }
}

std::optional<Tokenizer::Special> Tokenizer::special_at(std::string_view text, size_t at) const {
  if (!special_start_[static_cast<unsigned char>(text[at])]) return std::nullopt;
  for (size_t length : special_lengths_) {  // longest first
    if (length > text.size() - at) continue;
    if (auto it = special_.find(text.substr(at, length)); it != special_.end()) return Special{it->second, length};
  }
  return std::nullopt;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  if (!parse_special || special_.empty()) {
    encode_ordinary(text, out);
    return out;
  }
  size_t done = 0, at = 0;
  while (at < text.size()) {
    const std::optional<Special> special = special_at(text, at);
    if (!special) {
      ++at;
      continue;
    }
    encode_ordinary(text.substr(done, at - done), out);
    out.push_back(special->id);
    at = done = at + special->length;
  }
  encode_ordinary(text.substr(done), out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

namespace {

// How a UTF-8 sequence starting with byte c continues (Unicode Table 3-7):
// its length, and the range its second byte must be in (which excludes
// overlong forms, surrogates and code points past U+10FFFF). Length 0: c
// starts no sequence.
struct Lead {
  size_t length;
  unsigned char low, high;
};
Lead lead_of(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_ += bytes;
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Lead lead = lead_of(static_cast<unsigned char>(pending_[i]));
    if (lead.length == 0) {
      out += kReplacement;
      i += 1;
      continue;
    }
    size_t valid = 1;  // bytes of this sequence that are right so far
    for (; valid < lead.length && i + valid < pending_.size(); ++valid) {
      const auto c = static_cast<unsigned char>(pending_[i + valid]);
      const unsigned char low = valid == 1 ? lead.low : 0x80, high = valid == 1 ? lead.high : 0xBF;
      if (c < low || c > high) break;
    }
    if (valid == lead.length) {
      out.append(pending_, i, valid);
    } else if (i + valid == pending_.size()) {
      break;  // incomplete so far: the next token may finish it
    } else {
      out += kReplacement;  // a maximal invalid sequence
    }
    i += valid;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out = pending_.empty() ? "" : kReplacement;
  pending_.clear();
  return out;
}

}  // namespace tps
