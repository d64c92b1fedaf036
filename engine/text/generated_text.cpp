#include "engine/text/generated_text.h"

namespace tps {

GeneratedText::GeneratedText(const TextOptions& o) : o_(o) {
  if (o.max_new_tokens == 0) stop_ = "length";
}

std::string GeneratedText::accept(int32_t id, const Tokenizer& tokenizer) {
  out_.push_back(id);
  if (is_stop_token(id)) {
    stop_ = "stop token";
    return "";
  }
  if (static_cast<int>(out_.size()) == o_.max_new_tokens) stop_ = "length";
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
