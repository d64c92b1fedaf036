#include "engine/text/byte_level.h"

#include <array>

namespace tps {
namespace {

bool printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
  std::array<uint16_t, 256> code_of_byte{};   // byte -> code point
  std::array<int16_t, 0x144> byte_of_code{};  // code point -> byte, -1 if none
  Tables() {
    byte_of_code.fill(-1);
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      code_of_byte[b] = static_cast<uint16_t>(printable(b) ? b : next++);
      byte_of_code[code_of_byte[b]] = static_cast<int16_t>(b);
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {  // the mapping's code points are all below U+0800
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string bytes_to_vocab_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, tables().code_of_byte[b]);
  return out;
}

std::optional<std::string> vocab_text_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = text[i];
    uint32_t cp;
    if (c < 0x80) {
      cp = c, i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F), i += 2;
    } else {
      return std::nullopt;
    }
    if (cp >= tables().byte_of_code.size() || tables().byte_of_code[cp] < 0) return std::nullopt;
    out += static_cast<char>(tables().byte_of_code[cp]);
  }
  return out;
}

}  // namespace tps
