#include "serve/responses/responses_output.h"

#include "engine/text/harmony_item.h"
#include "serve/api/reasoning_blob.h"

namespace tps {

using json = nlohmann::ordered_json;

ResponseOutput::ResponseOutput(const Tokenizer& tokenizer, std::string ids, std::vector<int32_t> tail,
                               ReasoningItems reasoning)
    : tok_(tokenizer), ids_(std::move(ids)), reasoning_(reasoning), messages_(std::move(tail)) {}

json ResponseOutput::part() const {
  if (type_ == Type::reasoning) return {{"type", "reasoning_text"}, {"text", text_}};
  return {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

void ResponseOutput::open(Type type, const std::string& name, bool final, std::vector<json>& events) {
  open_ = true, type_ = type;
  text_.clear();
  const std::string index = std::to_string(items_.size());
  switch (type) {
    case Type::message:
      item_ = {{"id", "msg_" + ids_ + "_" + index},
               {"type", "message"},
               {"status", "in_progress"},
               {"role", "assistant"},
               {"content", json::array()}};
      if (!final) item_["phase"] = "commentary";
      break;
    case Type::reasoning:
      item_ = {{"id", "rs_" + ids_ + "_" + index},
               {"type", "reasoning"},
               {"summary", json::array()},
               {"content", json::array()},
               {"status", "in_progress"}};
      break;
    case Type::function_call: {
      // A namespaced tool's call names its namespace apart, as OpenAI's
      // ResponseFunctionToolCall does.
      const size_t dot = name.find('.');
      item_ = {{"id", "fc_" + ids_ + "_" + index},
               {"type", "function_call"},
               {"status", "in_progress"},
               {"call_id", "call_" + ids_ + "_" + index},
               {"name", dot == std::string::npos ? name : name.substr(dot + 1)},
               {"arguments", ""}};
      if (dot != std::string::npos) item_["namespace"] = name.substr(0, dot);
      break;
    }
  }
  events.push_back({{"type", "response.output_item.added"}, {"output_index", items_.size()}, {"item", item_}});
  if (type != Type::function_call)
    events.push_back({{"type", "response.content_part.added"},
                      {"item_id", item_["id"]},
                      {"output_index", items_.size()},
                      {"content_index", 0},
                      {"part", part()}});
}

void ResponseOutput::add(const std::string& text, std::vector<json>& events) {
  if (text.empty()) return;
  text_ += text;
  json e = {{"item_id", item_["id"]}, {"output_index", items_.size()}};
  if (type_ == Type::function_call) {
    e["type"] = "response.function_call_arguments.delta";
  } else {
    e["type"] = type_ == Type::message ? "response.output_text.delta" : "response.reasoning_text.delta";
    e["content_index"] = 0;
    if (type_ == Type::message) e["logprobs"] = json::array();
  }
  e["delta"] = text;
  events.push_back(std::move(e));
}

void ResponseOutput::close(const char* status, std::vector<json>& events) {
  add(stream_.flush(), events);
  const json where = {{"item_id", item_["id"]}, {"output_index", items_.size()}};
  json done = where;
  if (type_ == Type::function_call) {
    done["type"] = "response.function_call_arguments.done";
    done["arguments"] = text_;
    item_["arguments"] = text_;
    called_ = true;
  } else {
    done["type"] = type_ == Type::message ? "response.output_text.done" : "response.reasoning_text.done";
    done["content_index"] = 0;
    done["text"] = text_;
    if (type_ == Type::message) done["logprobs"] = json::array();
    item_["content"] = json::array({part()});
    if (type_ == Type::reasoning && reasoning_ == ReasoningItems::text_and_blob)
      item_["encrypted_content"] = reasoning_blob(text_);
  }
  events.push_back(std::move(done));
  if (type_ != Type::function_call) {
    json part_done = where;
    part_done.update({{"type", "response.content_part.done"}, {"content_index", 0}, {"part", part()}});
    events.push_back(std::move(part_done));
  }
  item_["status"] = status;
  events.push_back({{"type", "response.output_item.done"}, {"output_index", items_.size()}, {"item", item_}});
  items_.push_back(std::move(item_));
  open_ = false;
}

std::vector<json> ResponseOutput::push(int32_t id) {
  std::vector<json> events;
  const std::string& bytes = tok_.token_bytes(id);
  messages_.push(id, bytes);
  const HarmonyStream::Step step = harmony_.push(id, bytes);
  if (step.part == HarmonyStream::Part::raw && !is_stop_token(id)) {
    if (!open_) open(Type::message, "", true, events);
    add(stream_.push(step.raw), events);
  } else if (step.part == HarmonyStream::Part::control && open_) {
    close("completed", events);
  } else if (step.part == HarmonyStream::Part::content) {
    if (!open_) {
      const HarmonyItem item = classify(*step.message);
      if (item.kind == HarmonyItem::Kind::call)
        open(Type::function_call, item.function, false, events);
      else if (item.kind == HarmonyItem::Kind::reasoning)
        open(Type::reasoning, "", false, events);
      else
        open(Type::message, "", item.kind == HarmonyItem::Kind::final, events);
    }
    if (type_ == Type::reasoning) ++reasoning_tokens_;
    add(stream_.push(bytes), events);
  }
  return events;
}

std::vector<json> ResponseOutput::finish(bool incomplete) {
  std::vector<json> events;
  if (open_) close(incomplete ? "incomplete" : "completed", events);
  messages_.finish();
  return events;
}

std::string ResponseOutput::output_text() const {
  std::string out;
  for (const json& item : items_)
    if (item["type"] == "message") out += item["content"][0]["text"].get<std::string>();
  return out;
}

}  // namespace tps
