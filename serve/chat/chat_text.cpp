#include "serve/chat/chat_text.h"

#include <algorithm>

#include "engine/text/harmony_item.h"

namespace tps {

ChatText::ChatText(const Tokenizer& tokenizer, bool chat, std::vector<std::string> stop, int top_logprobs,
                   std::string call_id_prefix)
    : tok_(tokenizer),
      chat_(chat),
      stop_(std::move(stop)),
      top_logprobs_(top_logprobs),
      call_id_prefix_(std::move(call_id_prefix)) {}

nlohmann::json ChatText::logprob_entry(const Pick& p) const {
  auto token = [&](int32_t id, float logprob) {
    const std::string& b = tok_.token_bytes(id);
    std::vector<int> bytes;
    for (unsigned char c : b) bytes.push_back(c);
    return nlohmann::json{{"token", b}, {"logprob", logprob}, {"bytes", bytes}};
  };
  nlohmann::json e = token(p.id, p.logprob);
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < std::min(p.n_top, top_logprobs_); ++i) top.push_back(token(p.top[i].id, p.top[i].logprob));
  e["top_logprobs"] = top;
  return e;
}

void ChatText::add_content(const std::string& text, Delta& d) {
  const std::string shown = stop_.push(text);
  d.content += shown;
  content_ += shown;
}

ChatText::Delta ChatText::push(const Pick& p) {
  Delta d;
  if (stop_.stopped()) return d;
  const std::string& bytes = tok_.token_bytes(p.id);
  const HarmonyStream::Step step =
      chat_ ? harmony_.push(p.id, bytes) : HarmonyStream::Step{HarmonyStream::Part::raw, nullptr, bytes};
  if (step.part == HarmonyStream::Part::raw) {
    if (is_stop_token(p.id)) return d;
    add_content(content_stream_.push(step.raw), d);
    if (top_logprobs_ >= 0) logprobs_.push_back(d.logprobs.emplace_back(logprob_entry(p)));
    return d;
  }
  if (step.part == HarmonyStream::Part::control) {
    // A message ended (or a new one began): what its streams held back.
    reasoning_ += d.reasoning = reasoning_stream_.flush();
    add_content(content_stream_.flush(), d);
    if (in_call_) {
      d.arguments = args_stream_.flush();
      if (!d.arguments.empty()) d.tool_call = static_cast<int>(calls_.size()) - 1;
      calls_.back().arguments += d.arguments;
    }
    in_call_ = false;
    return d;
  }
  if (step.part != HarmonyStream::Part::content) return d;
  const HarmonyItem item = classify(*step.message);
  if (item.kind == HarmonyItem::Kind::call) {
    if (!in_call_) {
      in_call_ = true;
      calls_.push_back({call_id_prefix_ + std::to_string(calls_.size()), item.function, ""});
      d.tool_call_started = true;
    }
    d.tool_call = static_cast<int>(calls_.size()) - 1;
    d.arguments = args_stream_.push(bytes);
    calls_.back().arguments += d.arguments;
  } else if (item.kind == HarmonyItem::Kind::reasoning) {
    ++reasoning_tokens_;
    reasoning_ += d.reasoning = reasoning_stream_.push(bytes);
  } else {
    add_content(content_stream_.push(bytes), d);
    if (top_logprobs_ >= 0) logprobs_.push_back(d.logprobs.emplace_back(logprob_entry(p)));
  }
  return d;
}

ChatText::Delta ChatText::finish() {
  Delta d;
  reasoning_ += d.reasoning = reasoning_stream_.flush();
  add_content(content_stream_.flush(), d);
  const std::string held = stop_.flush();
  d.content += held;
  content_ += held;
  return d;
}

}  // namespace tps
