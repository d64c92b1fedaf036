#include "engine/text/generated_text.h"

namespace tps {

GeneratedText::GeneratedText(const TextOptions& o) : o_(o) {}

std::string GeneratedText::accept(int32_t id, const Tokenizer& tokenizer) {
  out_.push_back(id);
  if (is_stop_token(id)) return "";
  const std::string& piece = tokenizer.token_bytes(id);
  if (o_.harmony) {
    const HarmonyStream::Step st = harmony_.push(id, piece);
    if (st.part == HarmonyStream::Part::raw) return text_.push(st.raw);
    const bool show = st.part == HarmonyStream::Part::content &&
                      (st.message->channel == "final" || (o_.show_analysis && !st.message->channel.empty()));
    if (!show) return "";
  }
  return text_.push(piece);
}

}  // namespace tps
