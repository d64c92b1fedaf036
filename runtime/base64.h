// Base64 (RFC 4648's standard alphabet, '=' padded): the o200k ranks' token
// bytes, and text a client is to hand back unchanged.
#pragma once

#include <string>
#include <string_view>

namespace tps {

std::string base64_encode(std::string_view bytes);

// The bytes `text` encodes, into `out`; false for a character outside the
// alphabet, padding anywhere but the end, or a length no encoding has.
// The padding may be left off.
bool base64_decode(std::string_view text, std::string& out);

}  // namespace tps
