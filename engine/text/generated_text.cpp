#include "launch/sequence.h"

namespace tps {

std::vector<int32_t> encode_prompt(const RunOptions& o, const Tokenizer& tokenizer, const std::string& text) {
  if (!o.chat) return tokenizer.encode(text, true);
  return render_chat_prompt(text, ChatOptions{"", o.reasoning, ""},
                            [&](const std::string& s) { return tokenizer.encode(s); });
}

Sequence::Sequence(const RunOptions& o, std::vector<int32_t> prompt) : o_(o), prompt_(std::move(prompt)) {
  if (o.max_tokens == 0) stop_ = "length";
}

std::string Sequence::accept(int32_t id, const Tokenizer& tokenizer) {
  out_.push_back(id);
  if (is_stop_token(id)) {
    stop_ = "stop token";
    return "";
  }
  if (static_cast<int>(out_.size()) == o_.max_tokens) stop_ = "length";
  const std::string& piece = tokenizer.token_bytes(id);
  if (o_.chat) {
    HarmonyStream::Step st = harmony_.push(id, piece);
    const bool show = st.part == HarmonyStream::Part::content &&
                      (st.channel.starts_with("final") || (o_.show_analysis && !st.channel.empty()));
    if (!show) return "";
  }
  return text_.push(piece);
}

}  // namespace tps
