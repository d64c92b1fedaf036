#include "serve/api/reasoning_blob.h"

#include "runtime/base64.h"

namespace tps {
namespace {

// The format's version: a later one can read this one's blobs, or refuse them by name.
constexpr std::string_view kTag = "tps-reasoning-1:";

}  // namespace

std::string reasoning_blob(std::string_view text) { return std::string(kTag) + base64_encode(text); }

std::optional<std::string> reasoning_of_blob(std::string_view blob) {
  std::string text;
  if (!blob.starts_with(kTag) || !base64_decode(blob.substr(kTag.size()), text)) return std::nullopt;
  return text;
}

}  // namespace tps
