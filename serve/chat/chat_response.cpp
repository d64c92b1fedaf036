#include "serve/chat/chat_response.h"

#include "runtime/build_info.h"
#include "runtime/error.h"
#include "serve/http/sse.h"

namespace tps {

using nlohmann::json;

json usage_json(int prompt, int completion, int cached, int reasoning) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}},
          {"completion_tokens_details", {{"reasoning_tokens", reasoning}}}};
}

ChatResponse::ChatResponse(std::string id, int64_t created, std::string model, bool chat, bool logprobs,
                           bool include_usage)
    : id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      chat_(chat),
      logprobs_(logprobs),
      include_usage_(include_usage) {}

json ChatResponse::envelope(bool chunk) const {
  return {{"id", id_},
          {"object", chat_ ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"system_fingerprint", cat("tps-", build_info().commit)}};
}

json ChatResponse::body(const ChatText& text, const std::string& finish_reason, const json& usage) const {
  json choice;
  if (chat_) {
    json message = {{"role", "assistant"}, {"content", text.content()}, {"refusal", nullptr}};
    if (!text.reasoning().empty()) message["reasoning_content"] = text.reasoning();
    if (!text.tool_calls().empty()) {
      message["tool_calls"] = json::array();
      for (const ChatText::ToolCall& c : text.tool_calls())
        message["tool_calls"].push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    choice = {{"index", 0},
              {"message", message},
              {"logprobs", logprobs_ ? json{{"content", text.logprobs()}} : json()},
              {"finish_reason", finish_reason}};
  } else {
    // The legacy completions' log-probabilities: parallel arrays.
    json lp;
    if (logprobs_) {
      lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}};
      for (const json& e : text.logprobs()) {
        lp["tokens"].push_back(e["token"]);
        lp["token_logprobs"].push_back(e["logprob"]);
        json top = json::object();
        for (const json& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
        lp["top_logprobs"].push_back(top);
      }
    }
    choice = {{"index", 0}, {"text", text.content()}, {"logprobs", lp}, {"finish_reason", finish_reason}};
  }
  json out = envelope(false);
  out["choices"] = json::array({choice});
  out["usage"] = usage;
  return out;
}

std::string ChatResponse::chunk(const json& delta, const json& finish, const json& logprobs) const {
  json choice = {{"index", 0}, {"finish_reason", finish}};
  if (chat_) {
    choice["delta"] = delta;
    if (logprobs_) choice["logprobs"] = logprobs.is_null() ? json() : json{{"content", logprobs}};
  } else {
    choice["text"] = delta.value("content", "");
    choice["logprobs"] = nullptr;
  }
  json c = envelope(true);
  c["choices"] = json::array({choice});
  if (include_usage_) c["usage"] = nullptr;
  return sse_event(c);
}

std::string ChatResponse::first_event() const {
  return chunk(chat_ ? json{{"role", "assistant"}, {"content", ""}} : json{{"content", ""}}, nullptr, json());
}

std::string ChatResponse::delta_events(const ChatText& text, const ChatText::Delta& d) const {
  std::string out;
  if (!d.reasoning.empty()) out += chunk({{"reasoning_content", d.reasoning}}, nullptr, json());
  if (!d.content.empty()) out += chunk({{"content", d.content}}, nullptr, d.logprobs);
  if (d.tool_call >= 0) {
    const ChatText::ToolCall& c = text.tool_calls()[d.tool_call];
    json call = {{"index", d.tool_call}};
    if (d.tool_call_started)
      call.update({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ""}}}});
    if (!d.arguments.empty()) call["function"]["arguments"] = d.arguments;
    out += chunk({{"tool_calls", json::array({call})}}, nullptr, json());
  }
  return out;
}

std::string ChatResponse::last_events(const std::string& finish_reason, const json& usage) const {
  std::string out = chunk(json::object(), finish_reason, json());
  if (include_usage_) {
    json u = envelope(true);
    u.erase("system_fingerprint");
    u["choices"] = json::array();
    u["usage"] = usage;
    out += sse_event(u);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace tps
