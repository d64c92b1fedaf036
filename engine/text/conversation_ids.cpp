#include "engine/text/conversation_ids.h"

#include "engine/text/harmony_item.h"
#include "runtime/error.h"

namespace tps {

MessageKind message_kind(const HarmonyMessage& m) {
  if (m.role != "assistant") return MessageKind::other;
  switch (classify({m.role, m.recipient, m.channel, m.content_type}).kind) {
    case HarmonyItem::Kind::reasoning: return MessageKind::analysis;
    case HarmonyItem::Kind::final: return MessageKind::final;
    default: return MessageKind::other;  // a call, commentary
  }
}

RenderedConversation render_parts(const Conversation& c, const EncodeText& encode_text) {
  RenderedConversation out;
  Conversation bare = c;
  bare.messages.clear();
  out.header = render_conversation(bare, encode_text);
  // The tail is <|start|> and "assistant"'s text; the header what precedes it.
  const std::vector<int32_t> assistant = encode_text("assistant");
  out.tail.push_back(harmony::kStart);
  out.tail.insert(out.tail.end(), assistant.begin(), assistant.end());
  out.header.resize(out.header.size() - out.tail.size());
  const std::vector<int32_t> all = render_conversation(c, encode_text);
  // Each message begins with the only <|start|> it holds: text is encoded
  // with special tokens unparsed, so no content can hold one.
  size_t at = out.header.size();
  for (const HarmonyMessage& m : c.messages) {
    if (at >= all.size() || all[at] != harmony::kStart) throw Error("a rendered message does not begin <|start|>");
    size_t end = at + 1;
    while (end < all.size() && all[end] != harmony::kStart) ++end;
    out.messages.push_back({std::vector<int32_t>(all.begin() + at, all.begin() + end), message_kind(m)});
    at = end;
  }
  if (all.size() - at != out.tail.size()) throw Error("a rendered conversation does not end <|start|>assistant");
  return out;
}

void drop_earlier_reasoning(std::vector<MessageIds>& messages) {
  size_t last_final = messages.size();
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].kind == MessageKind::final) last_final = i;
  if (last_final == messages.size()) return;
  std::vector<MessageIds> kept;
  for (size_t i = 0; i < messages.size(); ++i)
    if (i > last_final || messages[i].kind != MessageKind::analysis) kept.push_back(std::move(messages[i]));
  messages = std::move(kept);
}

std::vector<int32_t> join_prompt(const std::vector<int32_t>& header, const std::vector<MessageIds>& messages,
                                 const std::vector<int32_t>& tail) {
  std::vector<int32_t> out = header;
  for (const MessageIds& m : messages) out.insert(out.end(), m.ids.begin(), m.ids.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

void OutputMessages::close(bool ended) {
  if (ids_.empty()) return;
  if (!ended) ids_.push_back(harmony::kEnd);
  messages_.push_back({std::move(ids_), kind_});
  ids_.clear();
  kind_ = MessageKind::other;
}

void OutputMessages::push(int32_t id, const std::string& piece) {
  using namespace harmony;
  const HarmonyStream::Step step = harmony_.push(id, piece);
  if (step.part == HarmonyStream::Part::raw && !is_stop_token(id))
    kind_ = MessageKind::final;  // output that does not follow harmony is shown as the answer
  else if (step.part == HarmonyStream::Part::content && kind_ == MessageKind::other) {
    const HarmonyItem item = classify(*step.message);
    kind_ = item.kind == HarmonyItem::Kind::reasoning ? MessageKind::analysis
            : item.kind == HarmonyItem::Kind::final   ? MessageKind::final
                                                      : MessageKind::other;
  }
  ids_.push_back(id == kReturn || id == kEndOfText ? kEnd : id);
  if (id == kEnd || id == kReturn || id == kCall || id == kEndOfText) close(true);
}

const std::vector<MessageIds>& OutputMessages::finish() {
  close(false);
  return messages_;
}

}  // namespace tps
