// A reasoning item's `encrypted_content` (the Responses API's
// include: ["reasoning.encrypted_content"]) and a thinking block's
// `signature` (the Messages API's): what lets a client that keeps
// no state on the server (store: false; Codex and other agents) hand a
// turn's reasoning back with its next request, which harmony keeps in the
// prompt while a turn of function calls goes on. OpenAI's is encrypted
// because its reasoning is hidden; gpt-oss's is the client's to read (the
// item's reasoning_text content says the same), so tps's is the text
// itself, base64 behind a version tag: opaque to clients, not secret.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tps {

std::string reasoning_blob(std::string_view text);

// The text of a blob reasoning_blob made; nullopt for anything else.
std::optional<std::string> reasoning_of_blob(std::string_view blob);

}  // namespace tps
