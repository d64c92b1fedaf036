#include "engine/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <queue>

#include "engine/byte_level.h"
#include "engine/gguf_reader.h"
#include "runtime/error.h"

namespace tps {
namespace {

// The o200k pre-tokenizer pattern (spec §5.2), identical in o200k_harmony.
constexpr const char* kPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

constexpr int32_t kTypeNormal = 1, kTypeControl = 3, kTypeUserDefined = 4;

}  // namespace

struct Tokenizer::Regex {
  pcre2_code* code = nullptr;
  Regex() {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
    if (!code) throw Error(cat("tokenizer: cannot compile the split pattern (PCRE2 error ", err, ")"));
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unavailable
  }
  ~Regex() { pcre2_code_free(code); }
};

Tokenizer::Tokenizer(std::span<const std::string_view> tokens, std::span<const int32_t> types,
                     std::span<const std::string_view> merges)
    : regex_(std::make_unique<Regex>()) {
  const size_t n = tokens.size();
  bytes_.resize(n);
  control_.assign(n, 0);
  std::unordered_map<std::string_view, int32_t> id_of_text;
  id_of_text.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = i < types.size() ? types[i] : kTypeNormal;
    std::optional<std::string> raw =
        type == kTypeControl || type == kTypeUserDefined ? std::nullopt : vocab_text_to_bytes(tokens[i]);
    control_[i] = !raw;
    bytes_[i] = raw ? std::move(*raw) : std::string(tokens[i]);
    id_of_text.emplace(tokens[i], static_cast<int32_t>(i));
  }
  id_of_bytes_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    if (control_[i]) special_.emplace(bytes_[i], static_cast<int32_t>(i));
    else id_of_bytes_.emplace(bytes_[i], static_cast<int32_t>(i));
  }
  for (int b = 0; b < 256; ++b) {
    std::string one(1, static_cast<char>(b));
    auto it = id_of_bytes_.find(one);
    if (it == id_of_bytes_.end())
      throw InputError(cat("tokenizer: the vocabulary has no token for byte ", b,
                           " (not a byte-level BPE vocabulary)"));
    byte_token_[b] = it->second;
  }
  merges_.reserve(merges.size() * 2);
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string_view m = merges[r];
    size_t space = m.find(' ');
    if (space == std::string_view::npos) continue;
    auto left = id_of_text.find(m.substr(0, space)), right = id_of_text.find(m.substr(space + 1));
    joined.assign(m.substr(0, space)).append(m.substr(space + 1));
    auto result = id_of_text.find(joined);
    if (left == id_of_text.end() || right == id_of_text.end() || result == id_of_text.end())
      continue;  // a merge whose pieces are not tokens can never apply
    uint64_t key = (static_cast<uint64_t>(left->second) << 32) | static_cast<uint32_t>(right->second);
    merges_.emplace(key, Merge{static_cast<uint32_t>(r), result->second});
  }
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
  return Tokenizer(tokens, types, merges);
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw InputError(cat("token id ", id, " is outside the vocabulary (0..", vocab_size() - 1, ")"));
  return bytes_[id];
}

bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < vocab_size() && control_[id]; }

std::optional<int32_t> Tokenizer::special_id(std::string_view text) const {
  auto it = special_.find(text);
  if (it == special_.end()) return std::nullopt;
  return it->second;
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (auto it = id_of_bytes_.find(piece); it != id_of_bytes_.end()) {
    out.push_back(it->second);  // the whole piece is a token (as tiktoken does first)
    return;
  }
  // Merge the adjacent pair of lowest merge rank until none applies; a heap
  // of candidate pairs keeps long pieces O(n log n).
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
    int32_t left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left) {
    if (left < 0 || parts[left].next < 0) return;
    const int right = parts[left].next;
    uint64_t key = (static_cast<uint64_t>(parts[left].id) << 32) | static_cast<uint32_t>(parts[right].id);
    auto it = merges_.find(key);
    if (it != merges_.end()) heap.push({it->second.rank, left, parts[left].id, parts[right].id});
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i) consider(static_cast<int>(i));
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Part& l = parts[c.left];
    if (l.id != c.left_id || l.next < 0 || parts[l.next].id != c.right_id) continue;  // stale
    const int right = l.next;
    l.id = merges_.at((static_cast<uint64_t>(c.left_id) << 32) | static_cast<uint32_t>(c.right_id)).result;
    l.next = parts[right].next;
    if (l.next >= 0) parts[l.next].prev = c.left;
    parts[right].id = -1;  // gone
    consider(l.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = parts[i].next) out.push_back(parts[i].id);
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(regex_->code, subject, text.size(), pos, 0, md, nullptr);
    size_t start = text.size(), end = text.size();
    if (rc > 0) {
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      start = ov[0], end = ov[1];
    }
    if (start > pos) encode_piece(text.substr(pos, start - pos), out);  // invalid UTF-8 bytes
    if (end == start) {
      if (start >= text.size()) break;
      end = start + 1;  // the pattern never matches empty; guard anyway
      encode_piece(text.substr(start, 1), out);
    } else {
      encode_piece(text.substr(start, end - start), out);
    }
    pos = end;
  }
  pcre2_match_data_free(md);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  if (!parse_special) {
    encode_ordinary(text, out);
    return out;
  }
  // Special tokens are "<|...|>": find each candidate and look it up.
  size_t done = 0, at = 0;
  while ((at = text.find("<|", at)) != std::string_view::npos) {
    size_t close = text.find("|>", at + 2);
    if (close == std::string_view::npos) break;
    if (auto it = special_.find(text.substr(at, close + 2 - at)); it != special_.end()) {
      encode_ordinary(text.substr(done, at - done), out);
      out.push_back(it->second);
      done = at = close + 2;
    } else {
      at += 1;
    }
  }
  encode_ordinary(text.substr(done), out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_ += bytes;
  // Hold back a trailing lead byte whose sequence is not complete yet.
  size_t keep = 0;
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    unsigned char c = pending_[pending_.size() - back];
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) keep = back;
    break;
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out = pending_.empty() ? "" : "\xEF\xBF\xBD";
  pending_.clear();
  return out;
}

}  // namespace tps
