#include "serve/messages/messages_request.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "runtime/json_text.h"
#include "serve/api/json_fields.h"
#include "serve/api/reasoning_blob.h"
#include "serve/api/request_fields.h"
#include "serve/api/tool_schema.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

std::string block_type(const json& block, const std::string& param) {
  if (!block.is_object() || !block.contains("type") || !block["type"].is_string())
    throw bad_param(param, cat("'", param, "' must be a content block (an object with a 'type')"));
  return block["type"].get<std::string>();
}

std::string text_of(const json& block, const char* key, const std::string& param) {
  const auto it = block.find(key);
  if (it == block.end() || !it->is_string())
    throw bad_param(param + "." + key, cat("'", param, ".", key, "' must be a string"));
  return it->get<std::string>();
}

// A string, or text blocks (what `system` and a tool_result's content are).
std::string text_blocks(const json& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_param(param, cat("'", param, "' must be a string or an array of text blocks"));
  std::string out;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string p = cat(param, "[", j, "]");
    const std::string type = block_type(content[j], p);
    if (type != "text")
      throw bad_param(p + ".type", cat("'", p, ".type' \"", type, "\" is not supported here (only text blocks)"));
    if (!out.empty()) out += '\n';
    out += text_of(content[j], "text", p);
  }
  return out;
}

// A user turn: text, and tool_results answering the calls made before.
void read_user(const json& content, const std::string& param, const std::map<std::string, std::string>& calls,
               Conversation& c) {
  if (content.is_string()) return c.messages.push_back({"user", "", "", "", content.get<std::string>()});
  if (!content.is_array() || content.empty())
    throw bad_param(param, cat("'", param, "' must be a string or a non-empty array of content blocks"));
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string p = cat(param, "[", j, "]");
    const json& block = content[j];
    const std::string type = block_type(block, p);
    if (type == "text") {
      c.messages.push_back({"user", "", "", "", text_of(block, "text", p)});
    } else if (type == "tool_result") {
      const std::string id = text_of(block, "tool_use_id", p);
      const auto call = calls.find(id);
      if (call == calls.end())
        throw bad_param(p + ".tool_use_id",
                        cat("'", p, ".tool_use_id' \"", id, "\" answers no tool_use of an earlier assistant turn"));
      std::string text = text_blocks(block.value("content", json()), p + ".content");
      // Harmony has no error flag on a tool's message: the model reads it.
      if (boolean_field(block, "is_error", false, p + ".is_error")) text = "Error: " + text;
      c.messages.push_back({"functions." + call->second, "commentary", "assistant", "", std::move(text)});
    } else {
      throw bad_param(p + ".type",
                      cat("'", p, ".type' \"", type, "\" is not supported in a user turn (only text and tool_result)"));
    }
  }
}

// A thinking block's text; its signature, when given, must be the one tps made of it.
std::string thinking_text(const json& block, const std::string& param) {
  std::string text = text_of(block, "thinking", param);
  const auto sig = block.find("signature");
  if (sig == block.end() || sig->is_null() || (sig->is_string() && sig->get<std::string>().empty())) return text;
  const std::optional<std::string> sealed =
      sig->is_string() ? reasoning_of_blob(sig->get<std::string>()) : std::nullopt;
  if (!sealed || *sealed != text)
    throw bad_param(param + ".signature",
                    cat("'", param, ".signature' is not the one tps made of this thinking (it reads only its own)"));
  return text;
}

// Each tool: harmony's functions namespace (unless tool_choice is none) and
// what the constraint holds its input to.
void read_tools(const json& body, const ApiLimits& limits, MessagesRequest& r) {
  const auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_array()) throw bad_param("tools", "'tools' must be an array of tools");
  json chat_shape = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string param = cat("tools[", i, "]");
    if (!t.is_object()) throw bad_param(param, "'" + param + "' must be an object (a tool)");
    const auto type = t.find("type");
    if (type != t.end() && !type->is_null() && *type != "custom")
      throw bad_param(param + ".type", cat("'", param, ".type' ", shown(t["type"]),
                                           " is not supported by this server (only custom tools: name, "
                                           "description, input_schema)"));
    const std::string name = string_field(t, "name");
    if (name.empty()) throw bad_param(param + ".name", cat("'", param, ".name' must be a non-empty string"));
    const auto schema = t.find("input_schema");
    if (schema == t.end() || !schema->is_object())
      throw bad_param(param + ".input_schema", cat("'", param, ".input_schema' must be a JSON Schema (an object)"));
    json f = {{"name", name}, {"parameters", *schema}};
    if (t.contains("description") && t["description"].is_string()) f["description"] = t["description"];
    chat_shape.push_back({{"type", "function"}, {"function", f}});
    // Not strict: held to its schema when the engine can (output_constraint.h).
    r.functions.push_back(
        {name, boolean_field(t, "strict", false, param + ".strict"), *schema, param + ".input_schema"});
  }
  if (r.choice.mode != ToolChoice::Mode::none && !chat_shape.empty())
    r.conversation.functions = render_functions(chat_shape, limits.prompt_bytes());
}

ToolChoice read_tool_choice_block(const json& body) {
  ToolChoice c;
  const auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return c;
  if (!it->is_object()) throw bad_param("tool_choice", "'tool_choice' must be an object with a 'type'");
  boolean_field(*it, "disable_parallel_tool_use", false, "tool_choice.disable_parallel_tool_use");  // one call a turn
  const std::string type = string_field(*it, "type");
  if (type == "auto") return c;
  if (type == "none") return c.mode = ToolChoice::Mode::none, c;
  if (type == "any") return c.mode = ToolChoice::Mode::required, c;
  if (type == "tool") {
    c.name = string_field(*it, "name");
    if (c.name.empty()) throw bad_param("tool_choice.name", "'tool_choice.name' must name a tool");
    return c.mode = ToolChoice::Mode::named, c;
  }
  throw bad_param("tool_choice.type",
                  cat("'tool_choice.type' ", shown(it->value("type", json())), " is not auto, any, tool or none"));
}

// thinking: enabled (budget_tokens picks the effort: under 2,048 low, under
// 8,192 medium, else high) or disabled (low, and not shown: gpt-oss always
// reasons). Absent: medium, shown.
void read_thinking(const json& body, int64_t max_tokens, MessagesRequest& r) {
  r.conversation.reasoning = "medium";
  const auto it = body.find("thinking");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_object()) throw bad_param("thinking", "'thinking' must be an object with a 'type'");
  const std::string type = string_field(*it, "type");
  if (type == "disabled") {
    r.conversation.reasoning = "low", r.show_thinking = false;
    return;
  }
  if (type != "enabled")
    throw bad_param("thinking.type",
                    cat("'thinking.type' ", shown(it->value("type", json())), " is not enabled or disabled"));
  const int64_t budget = integer_field(*it, "budget_tokens", 1, INT32_MAX, -1, "thinking.budget_tokens");
  if (budget < 0) throw bad_param("thinking.budget_tokens", "'thinking.budget_tokens' is missing");
  if (max_tokens > 0 && budget >= max_tokens)
    throw bad_param("thinking.budget_tokens",
                    cat("'thinking.budget_tokens' is ", budget, ", not less than max_tokens (", max_tokens, ")"));
  r.conversation.reasoning = budget < 2048 ? "low" : budget < 8192 ? "medium" : "high";
  r.thinking_budget = static_cast<int>(budget);
}

std::vector<std::string> read_stop_sequences(const json& body) {
  std::vector<std::string> stop;
  const auto it = body.find("stop_sequences");
  if (it == body.end() || it->is_null()) return stop;
  if (!it->is_array()) throw bad_param("stop_sequences", "'stop_sequences' must be an array of strings");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& s = (*it)[i];
    if (!s.is_string() || s.get<std::string>().empty())
      throw bad_param(cat("stop_sequences[", i, "]"), cat("'stop_sequences[", i, "]' must be a non-empty string"));
    stop.push_back(s.get<std::string>());
  }
  return stop;
}

// The fields of the Messages API tps reads; any other is refused by name
// (a field that changes the answer is never taken and ignored). count_tokens
// takes the same body; what only generation reads does not change its count.
void refuse_unknown(const json& body) {
  static const char* const kKnown[] = {"model",    "messages", "system",         "max_tokens",   "temperature",
                                       "top_p",    "top_k",    "tools",          "tool_choice",  "thinking",
                                       "metadata", "stream",   "stop_sequences", "service_tier", "cache_control"};
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* k : kKnown) known |= key == k;
    if (!known) throw bad_param(key, cat("'", key, "' is not a field of the Messages API this server serves"));
  }
  // "auto" and "standard_only" both get the one tier there is.
  const auto tier = body.find("service_tier");
  if (tier != body.end() && !tier->is_null() && *tier != "auto" && *tier != "standard_only")
    throw bad_param("service_tier", cat("'service_tier' ", shown(*tier), " is not auto or standard_only"));
}

void read_messages(const json& body, MessagesRequest& r) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    throw bad_param("messages", "'messages' must be a non-empty array of messages");
  std::map<std::string, std::string> calls;  // tool_use id -> name
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = cat("messages[", i, "]");
    if (!m.is_object()) throw bad_param(param, "'" + param + "' must be an object (a message)");
    const std::string role = string_field(m, "role");
    const json content = m.value("content", json());
    if (role == "user") {
      read_user(content, param + ".content", calls, r.conversation);
    } else if (role == "assistant") {
      if (i + 1 == it->size())
        throw bad_param(param, cat("'", param,
                                   "' is an assistant turn to continue (a prefill), which this server "
                                   "does not do: the last message must be the user's"));
      std::vector<HarmonyMessage> said = assistant_messages(content, param + ".content");
      for (size_t j = 0; content.is_array() && j < content.size(); ++j)
        if (string_field(content[j], "type") == "tool_use")
          calls[string_field(content[j], "id")] = string_field(content[j], "name");
      MessagesRequest::AssistantTurn turn{r.conversation.messages.size(), 0, assistant_turn_key(said)};
      r.conversation.messages.insert(r.conversation.messages.end(), said.begin(), said.end());
      turn.end = r.conversation.messages.size();
      r.assistant_turns.push_back(std::move(turn));
    } else {
      throw bad_param(param + ".role", cat("'", param, ".role' ", shown(m.value("role", json())),
                                           " is not user or assistant (the system prompt is 'system')"));
    }
  }
}

}  // namespace

std::vector<HarmonyMessage> assistant_messages(const json& content, const std::string& param) {
  std::vector<HarmonyMessage> out;
  if (content.is_string()) {
    out.push_back({"assistant", "final", "", "", content.get<std::string>()});
    return out;
  }
  if (!content.is_array()) throw bad_param(param, cat("'", param, "' must be a string or an array of content blocks"));
  bool calls = false;  // text before a call is a preamble (commentary), as harmony says it
  for (const json& block : content) calls |= block.is_object() && block.value("type", json()) == "tool_use";
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string p = cat(param, "[", j, "]");
    const json& block = content[j];
    const std::string type = block_type(block, p);
    if (type == "text") {
      out.push_back({"assistant", calls ? "commentary" : "final", "", "", text_of(block, "text", p)});
    } else if (type == "thinking") {
      out.push_back({"assistant", "analysis", "", "", thinking_text(block, p)});
    } else if (type == "tool_use") {
      const std::string name = text_of(block, "name", p);
      text_of(block, "id", p);
      const auto input = block.find("input");
      if (input == block.end() || !input->is_object())
        throw bad_param(p + ".input", cat("'", p, ".input' must be an object (the tool's arguments)"));
      out.push_back({"assistant", "commentary", "functions." + name, "<|constrain|>json", json_text(*input)});
    } else {
      throw bad_param(p + ".type", cat("'", p, ".type' \"", type,
                                       "\" is not supported in an assistant turn (only text, thinking, tool_use)"));
    }
  }
  return out;
}

std::string assistant_turn_key(const std::vector<HarmonyMessage>& messages) {
  // Not its thinking: a client may leave earlier thinking out, and harmony
  // keeps or drops it by its own rule once the ids are found.
  json key = json::array();
  for (const HarmonyMessage& m : messages)
    if (m.channel != "analysis") key.push_back({m.channel, m.recipient, m.content});
  return json_text(key);
}

MessagesRequest parse_messages_request(const json& body, const ApiLimits& limits, bool count_only) {
  if (!body.is_object()) throw bad_param("", "the request body must be a JSON object");
  MessagesRequest r;
  refuse_unknown(body);
  check_model(body, limits.model_id);
  int64_t max = 0;
  if (!count_only) {
    if (!body.contains("max_tokens") || body["max_tokens"].is_null())
      throw bad_param("max_tokens", "'max_tokens' is missing (the Messages API needs it)");
    max = integer_field(body, "max_tokens", 1, INT64_MAX, 0);
    r.max_new_tokens = static_cast<int>(std::min<int64_t>(max, limits.context));  // then the room (Server::submit)
    r.stream = boolean_field(body, "stream", false);
    r.sampler.temperature = static_cast<float>(number_field(body, "temperature", 0, 1, 1));
    r.sampler.top_p = static_cast<float>(number_field(body, "top_p", 0, 1, 1));
    if (r.sampler.top_p <= 0) throw bad_param("top_p", "'top_p' must be above 0");
    r.sampler.top_k = static_cast<int>(integer_field(body, "top_k", 0, INT32_MAX, 0));
    r.stop = read_stop_sequences(body);
  }
  const auto metadata = body.find("metadata");
  if (metadata != body.end() && !metadata->is_null() && !metadata->is_object())
    throw bad_param("metadata", "'metadata' must be an object");
  r.conversation.instructions = text_blocks(body.value("system", json()), "system");
  read_thinking(body, max, r);
  r.choice = read_tool_choice_block(body);
  read_tools(body, limits, r);
  read_messages(body, r);
  const int budget = effort_budget(r.conversation.reasoning);
  r.reasoning_budget = r.thinking_budget > 0 ? std::min(budget, r.thinking_budget) : budget;
  // The final answer is free unless the server holds it (serve --grammar).
  r.output = harmony_turn_constraint(limits.default_final, r.functions, r.choice, r.reasoning_budget);
  size_t bytes = r.conversation.instructions.size() + r.conversation.functions.size();
  for (const HarmonyMessage& m : r.conversation.messages) bytes += m.content.size();
  check_prompt_bytes(bytes, limits, "messages");
  return r;
}

}  // namespace tps
