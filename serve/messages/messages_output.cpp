#include "serve/messages/messages_output.h"

#include "engine/text/harmony_item.h"
#include "runtime/error.h"
#include "serve/api/reasoning_blob.h"

namespace tps {

using json = nlohmann::ordered_json;

MessagesOutput::MessagesOutput(const Tokenizer& tokenizer, std::string ids, std::vector<int32_t> tail,
                               bool show_thinking, std::vector<std::string> stop)
    : tok_(tokenizer),
      ids_(std::move(ids)),
      show_thinking_(show_thinking),
      stop_(std::move(stop)),
      messages_(std::move(tail)) {}

void MessagesOutput::open(Type type, const std::string& name, std::vector<json>& events) {
  open_ = true, type_ = type, hidden_ = type == Type::thinking && !show_thinking_;
  text_.clear();
  if (hidden_) return;
  switch (type) {
    case Type::text: block_ = {{"type", "text"}, {"text", ""}}; break;
    case Type::thinking: block_ = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}; break;
    case Type::tool_use:
      block_ = {{"type", "tool_use"},
                {"id", cat("toolu_", ids_, "_", content_.size())},
                {"name", name},
                {"input", json::object()}};
      break;
  }
  events.push_back({{"type", "content_block_start"}, {"index", content_.size()}, {"content_block", block_}});
}

void MessagesOutput::add(const std::string& piece, std::vector<json>& events) {
  const std::string text = type_ == Type::text ? stop_.push(piece) : piece;
  if (text.empty() || hidden_) return;
  text_ += text;
  json delta = type_ == Type::text       ? json{{"type", "text_delta"}, {"text", text}}
               : type_ == Type::thinking ? json{{"type", "thinking_delta"}, {"thinking", text}}
                                         : json{{"type", "input_json_delta"}, {"partial_json", text}};
  events.push_back({{"type", "content_block_delta"}, {"index", content_.size()}, {"delta", std::move(delta)}});
}

void MessagesOutput::close(std::vector<json>& events) {
  add(stream_.flush(), events);
  if (type_ == Type::text) add(stop_.flush(), events);
  open_ = false;
  if (hidden_) return;
  if (type_ == Type::text) {
    block_["text"] = text_;
  } else if (type_ == Type::thinking) {
    block_["thinking"] = text_;
    block_["signature"] = reasoning_blob(text_);
    events.push_back({{"type", "content_block_delta"},
                      {"index", content_.size()},
                      {"delta", {{"type", "signature_delta"}, {"signature", block_["signature"]}}}});
  } else {
    // Arguments cut short (max_tokens) or not JSON (a tool held to no
    // schema) are no object: the input is then empty, the stop reason says why.
    json input = json::parse(text_, nullptr, false);
    block_["input"] = input.is_object() ? input : json::object();
    called_ = true;
  }
  events.push_back({{"type", "content_block_stop"}, {"index", content_.size()}});
  content_.push_back(std::move(block_));
}

std::vector<json> MessagesOutput::push(int32_t id) {
  std::vector<json> events;
  if (stop_.stopped()) return events;
  const std::string& bytes = tok_.token_bytes(id);
  messages_.push(id, bytes);
  const HarmonyStream::Step step = harmony_.push(id, bytes);
  if (step.part == HarmonyStream::Part::raw && !is_stop_token(id)) {
    if (!open_) open(Type::text, "", events);
    add(stream_.push(step.raw), events);
  } else if (step.part == HarmonyStream::Part::control && open_) {
    close(events);
  } else if (step.part == HarmonyStream::Part::content) {
    if (!open_) {
      const HarmonyItem item = classify(*step.message);
      open(item.kind == HarmonyItem::Kind::call        ? Type::tool_use
           : item.kind == HarmonyItem::Kind::reasoning ? Type::thinking
                                                       : Type::text,
           item.function, events);
    }
    add(stream_.push(bytes), events);
  }
  if (stop_.stopped() && open_) close(events);
  return events;
}

std::vector<json> MessagesOutput::finish() {
  std::vector<json> events;
  if (open_) close(events);
  messages_.finish();
  return events;
}

const char* MessagesOutput::stop_reason(bool length) const {
  if (stop_.stopped()) return "stop_sequence";
  if (length) return "max_tokens";
  return called_ ? "tool_use" : "end_turn";
}

json MessagesOutput::stop_sequence() const { return stop_.stopped() ? json(stop_.found()) : json(); }

}  // namespace tps
