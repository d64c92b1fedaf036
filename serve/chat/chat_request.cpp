#include "serve/chat/chat_request.h"

#include <map>
#include <vector>

#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "serve/api/json_fields.h"
#include "serve/api/request_fields.h"
#include "serve/api/tool_schema.h"
#include "serve/http/api_error.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

ApiError bad(const std::string& param, const std::string& message) { return bad_param(param, message); }

double number(const json& body, const std::string& key, double lo, double hi, double fallback) {
  return number_field(body, key, lo, hi, fallback);
}
int64_t integer(const json& body, const std::string& key, int64_t lo, int64_t hi, int64_t fallback) {
  return integer_field(body, key, lo, hi, fallback);
}
bool boolean(const json& body, const std::string& key, bool fallback) { return boolean_field(body, key, fallback); }

// What the two endpoints share: model, sampling, length, stop, streaming.
void read_common(const json& body, const ApiLimits& limits, GenerationRequest& r) {
  if (!body.is_object()) throw bad("", "the request body must be a JSON object");
  only_default(body, "frequency_penalty", 0);
  only_default(body, "presence_penalty", 0);
  only_default(body, "logit_bias", json::object());
  check_model(body, limits.model_id);
  if (integer(body, "n", 1, 1, 1) != 1) throw bad("n", "'n' must be 1");
  r.stream = boolean(body, "stream", false);
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    if (!body["stream_options"].is_object()) throw bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(body["stream_options"], "include_usage", false);
  }
  r.sampler.temperature = static_cast<float>(number(body, "temperature", 0, 2, 1));
  r.sampler.top_p = static_cast<float>(number(body, "top_p", 0, 1, 1));
  if (r.sampler.top_p <= 0) throw bad("top_p", "'top_p' must be above 0");
  r.sampler.top_k = static_cast<int>(integer(body, "top_k", 0, 1 << 20, 0));
  r.sampler.min_p = static_cast<float>(number(body, "min_p", 0, 1, 0));
  if (r.sampler.min_p >= 1) throw bad("min_p", "'min_p' must be below 1");
  r.seed_given = body.contains("seed") && !body["seed"].is_null();
  r.sampler.seed = static_cast<uint64_t>(integer(body, "seed", 0, INT64_MAX, 0));
  const int64_t max =
      integer(body, "max_completion_tokens", 1, INT64_MAX, integer(body, "max_tokens", 1, INT64_MAX, 0));
  // More than the room the prompt leaves is the room (Server::submit), as llama-server and Ollama take it.
  r.max_new_tokens = static_cast<int>(std::min<int64_t>(max, limits.context));
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& s = body["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 4) {
      for (const json& x : s) {
        if (!x.is_string()) throw bad("stop", "'stop' must be a string or up to 4 strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      throw bad("stop", "'stop' must be a string or up to 4 strings");
    }
    for (const std::string& x : r.stop)
      if (x.empty()) throw bad("stop", "a stop sequence must not be empty");
  }
}

// A message's text: a string, or text parts.
std::string text_of(const json& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad(param, "'content' must be a string or an array of text parts");
  std::string out;
  for (const json& part : content) {
    if (!part.is_object() || string_field(part, "type") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad(param, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    out += part["text"].get<std::string>();
  }
  return out;
}

// The functions offered, as tool_choice says: "none" offers none (the
// model sees no functions). What the answer must be (a call, JSON) is the
// output constraint's (serve/api/output_constraint.h).
void read_tools(const json& body, const ApiLimits& limits, ChatRequest& r) {
  const ToolChoice choice = read_tool_choice(body);
  boolean(body, "parallel_tool_calls", true);  // one call per answer: harmony's <|call|> ends it
  for (const char* legacy : {"functions", "function_call"})
    if (body.contains(legacy) && !body[legacy].is_null())
      throw bad(legacy, cat("'", legacy, "' is the deprecated form of 'tools' and 'tool_choice': send those"));
  only_default(body, "modalities", json::array({"text"}));
  only_default(body, "audio", nullptr);
  only_default(body, "prediction", nullptr);
  if (choice.mode == ToolChoice::Mode::none || !body.contains("tools") || body["tools"].is_null() ||
      body["tools"].empty())
    return;
  r.conversation.functions = render_functions(body["tools"], limits.prompt_bytes());
  r.tools = true;
}

}  // namespace

ChatRequest parse_chat_request(const json& body, const ApiLimits& limits) {
  ChatRequest r;
  read_common(body, limits, r);
  r.logprobs = boolean(body, "logprobs", false);
  r.top_logprobs = static_cast<int>(integer(body, "top_logprobs", 0, 20, 0));
  if (r.top_logprobs > 0 && !r.logprobs) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  Conversation& c = r.conversation;
  // Reasoning effort: top level, or as chat templates take it.
  std::string effort = "medium";
  const json* e = body.contains("reasoning_effort") ? &body["reasoning_effort"] : nullptr;
  if (!e && body.contains("chat_template_kwargs") && body["chat_template_kwargs"].is_object() &&
      body["chat_template_kwargs"].contains("reasoning_effort"))
    e = &body["chat_template_kwargs"]["reasoning_effort"];
  if (e && !e->is_null()) {
    if (!e->is_string()) throw bad("reasoning_effort", "'reasoning_effort' must be low, medium or high");
    effort = e->get<std::string>();
    if (effort == "minimal") effort = "low";
    if (effort != "low" && effort != "medium" && effort != "high")
      throw bad("reasoning_effort", "'reasoning_effort' is '" + effort + "', expected low, medium or high");
  }
  c.reasoning = effort;
  read_tools(body, limits, r);
  r.output = read_chat_constraint(body, effort_budget(effort), limits.default_final);
  if (!body.contains("messages")) throw bad("messages", "'messages' is missing");
  const json& messages = body["messages"];
  if (!messages.is_array() || messages.empty()) throw bad("messages", "'messages' must be a non-empty array");
  // An assistant turn's reasoning is passed back only while the turn goes
  // on (after the last user message: a tool call and its results); earlier
  // turns' reasoning is dropped, as harmony asks.
  size_t last_user = 0;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].is_object() && string_field(messages[i], "role") == "user") last_user = i;
  std::map<std::string, std::string> tool_names;  // tool_call_id -> function name
  std::string last_call;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad(param, param + " must be an object with a 'role'");
    const std::string role = m["role"].get<std::string>();
    const std::string text = text_of(m.value("content", json()), param + ".content");
    if (role == "system" || role == "developer") {
      c.instructions += (c.instructions.empty() ? "" : "\n\n") + text;
    } else if (role == "user") {
      c.messages.push_back({"user", "", "", "", text});
    } else if (role == "assistant") {
      std::string reasoning;
      for (const char* key : {"reasoning_content", "reasoning"})
        if (m.contains(key) && m[key].is_string()) reasoning = m[key].get<std::string>();
      if (!reasoning.empty() && i > last_user) c.messages.push_back({"assistant", "analysis", "", "", reasoning});
      const bool calls = m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty();
      if (!text.empty()) c.messages.push_back({"assistant", calls ? "commentary" : "final", "", "", text});
      if (calls)
        for (const json& call : m["tool_calls"]) {
          if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
              !call["function"].contains("name") || !call["function"]["name"].is_string())
            throw bad(param + ".tool_calls", "a tool call needs function.name");
          const json& f = call["function"];
          const std::string name = f["name"].get<std::string>();
          const json args = f.contains("arguments") ? f["arguments"] : json("{}");
          c.messages.push_back({"assistant", "commentary", "functions." + name, "<|constrain|>json",
                                args.is_string() ? args.get<std::string>() : args.dump()});
          if (call.contains("id") && call["id"].is_string()) tool_names[call["id"].get<std::string>()] = name;
          last_call = name;
        }
    } else if (role == "tool") {
      std::string name = last_call;
      if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
        auto it = tool_names.find(m["tool_call_id"].get<std::string>());
        if (it != tool_names.end()) name = it->second;
      }
      if (name.empty()) throw bad(param, "a tool message answers no earlier tool call");
      c.messages.push_back({"functions." + name, "commentary", "assistant", "", text});
    } else {
      throw bad(param + ".role", "role '" + role + "' is not one of system, developer, user, assistant, tool");
    }
  }
  size_t bytes = c.instructions.size() + c.functions.size();
  for (const HarmonyMessage& m : c.messages) bytes += m.content.size();
  check_prompt_bytes(bytes, limits, "messages");
  return r;
}

CompletionRequest parse_completion_request(const json& body, const ApiLimits& limits) {
  CompletionRequest r;
  read_common(body, limits, r);
  only_default(body, "echo", false);
  only_default(body, "suffix", "");
  only_default(body, "best_of", 1);
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    r.top_logprobs = static_cast<int>(integer(body, "logprobs", 0, 20, 0));
    r.logprobs = true;
  }
  if (!body.contains("prompt") || !body["prompt"].is_string()) throw bad("prompt", "'prompt' must be a string");
  r.prompt = body["prompt"].get<std::string>();
  if (r.prompt.empty()) throw bad("prompt", "'prompt' is empty");
  check_prompt_bytes(r.prompt.size(), limits, "prompt");
  r.output = read_completion_constraint(body);
  return r;
}

}  // namespace tps
