// GPT-2's byte <-> unicode mapping (spec §5.3): byte-level BPE vocabularies
// in GGUF store each token's bytes as printable code points -- bytes
// 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF as themselves, the other 68 bytes as
// U+0100 + their order (space 0x20 becomes U+0120 'Ġ').
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tps {

// The UTF-8 text a vocabulary stores for raw token bytes.
std::string bytes_to_vocab_text(std::string_view bytes);
// The raw bytes of a vocabulary entry; nullopt if it contains a code point
// outside the mapping (then it is not a byte-level token).
std::optional<std::string> vocab_text_to_bytes(std::string_view text);

}  // namespace tps
