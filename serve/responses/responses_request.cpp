#include "serve/responses/responses_request.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>

#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "serve/api/json_fields.h"
#include "serve/api/reasoning_blob.h"
#include "serve/api/request_fields.h"
#include "serve/api/tool_schema.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

// A content's text: a string, or parts of the types given.
std::string content_text(const json& content, const std::string& param, std::initializer_list<const char*> types) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_param(param, cat("'", param, "' must be a string or an array of text parts"));
  std::string out;
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string p = cat(param, "[", j, "]");
    const std::string type = part.is_object() ? string_field(part, "type") : "";
    bool known = false;
    for (const char* t : types) known |= type == t;
    if (!known) {
      std::string expected;
      for (const char* t : types) expected += (expected.empty() ? "" : ", ") + std::string(t);
      throw bad_param(p + ".type", cat("'", p, ".type' ", part.is_object() ? shown(part.value("type", json())) : "",
                                       " is not supported here (only ", expected, " parts)"));
    }
    if (!part.contains("text") || !part["text"].is_string())
      throw bad_param(p + ".text", "'" + p + ".text' must be a string");
    out += part["text"].get<std::string>();
  }
  return out;
}

std::string required_string(const json& item, const char* key, const std::string& param) {
  const std::string s = string_field(item, key);
  if (s.empty()) throw bad_param(param + "." + key, cat("'", param, ".", key, "' must be a non-empty string"));
  return s;
}

void add_message(ResponsesRequest& r, HarmonyMessage m, std::string answers = "") {
  r.conversation.messages.push_back(std::move(m));
  r.output_calls.push_back(std::move(answers));
}

// A reasoning item's encrypted_content as the text tps put there ("" without one).
std::string sealed_reasoning(const json& item, const std::string& param) {
  const auto it = item.find("encrypted_content");
  if (it == item.end() || it->is_null()) return "";
  std::optional<std::string> text = it->is_string() ? reasoning_of_blob(it->get<std::string>()) : std::nullopt;
  if (!text)
    throw bad_param(param + ".encrypted_content",
                    cat("'", param, ".encrypted_content' is not one tps made (it reads only its own: the ",
                        "reasoning.encrypted_content of its responses)"));
  return *text;
}

// One item of `input`: a harmony message (or instructions), and the item
// as input_items lists it.
void read_item(const json& item, size_t i, const std::string& id, ResponsesRequest& r) {
  const std::string param = cat("input[", i, "]");
  if (!item.is_object()) throw bad_param(param, "'" + param + "' must be an object (an input item)");
  const std::string type = string_field(item, "type", "message");
  json listed = item;
  listed["id"] = string_field(item, "id", id);
  listed["type"] = type;
  listed["status"] = "completed";
  if (type == "message") {
    const std::string role = string_field(item, "role");
    const std::string text =
        content_text(item.value("content", json()), param + ".content", {"input_text", "output_text", "text"});
    if (item.contains("content") && item["content"].is_string())
      listed["content"] = json::array({{{"type", role == "assistant" ? "output_text" : "input_text"}, {"text", text}}});
    if (role == "system" || role == "developer")
      r.item_instructions += (r.item_instructions.empty() ? "" : "\n\n") + text;
    else if (role == "user")
      add_message(r, {"user", "", "", "", text});
    else if (role == "assistant")
      add_message(r, {"assistant", string_field(item, "phase") == "commentary" ? "commentary" : "final", "", "", text});
    else
      throw bad_param(param + ".role", cat("'", param, ".role' ", shown(item.value("role", json())),
                                           " is not one of user, system, developer, assistant"));
  } else if (type == "function_call") {
    const std::string name = qualified_name(item), call = required_string(item, "call_id", param);
    if (name.empty() || name.front() == '.' || name.back() == '.')
      throw bad_param(param + ".name", cat("'", param, ".name' must be a non-empty string"));
    const json args = item.value("arguments", json("{}"));
    if (!args.is_string()) throw bad_param(param + ".arguments", "'" + param + ".arguments' must be a string");
    add_message(r, {"assistant", "commentary", tool_recipient(name), "<|constrain|>json", args.get<std::string>()});
    r.input_calls[call] = name;
  } else if (type == "function_call_output") {
    // By its call's id, or by the tool's (namespaced) name alone: Codex
    // sends outputs of its own with no call before them.
    const std::string text = content_text(item.value("output", json()), param + ".output", {"input_text"});
    const std::string tool = qualified_name(item);
    if (string_field(item, "call_id").empty() && !tool.empty() && tool.front() != '.' && tool.back() != '.')
      add_message(r, {tool_recipient(tool), "commentary", "assistant", "", text});
    else
      add_message(r, {"functions.", "commentary", "assistant", "", text}, required_string(item, "call_id", param));
  } else if (type == "reasoning") {
    const std::string sealed = sealed_reasoning(item, param);
    std::string text = content_text(item.value("content", json()), param + ".content", {"reasoning_text"});
    if (text.empty()) text = sealed;
    if (text.empty()) text = content_text(item.value("summary", json()), param + ".summary", {"summary_text"});
    add_message(r, {"assistant", "analysis", "", "", text});
  } else {
    throw bad_param(param + ".type", cat("'", param, ".type' ", shown(item["type"]),
                                         " is not one of message, function_call, function_call_output, reasoning"));
  }
  r.input_items.push_back(std::move(listed));
}

void read_input(const json& body, ResponsesRequest& r, const std::string& ids) {
  const auto it = body.find("input");
  if (it == body.end() || it->is_null()) throw bad_param("input", "'input' is missing");
  if (it->is_string()) {
    add_message(r, {"user", "", "", "", it->get<std::string>()});
    r.input_items.push_back({{"id", "msg_" + ids + "_in0"},
                             {"type", "message"},
                             {"role", "user"},
                             {"status", "completed"},
                             {"content", json::array({{{"type", "input_text"}, {"text", *it}}})}});
    return;
  }
  if (!it->is_array() || it->empty())
    throw bad_param("input", "'input' must be a string or a non-empty array of items");
  for (size_t i = 0; i < it->size(); ++i) read_item((*it)[i], i, cat("item_", ids, "_in", i), r);
}

// Tools the server cannot run for the model (a hosted search, a code
// interpreter, a computer, a remote MCP server): left out of the prompt, the
// request served, and the omission said (ResponsesRequest::omitted_tools).
bool hosted_tool(const std::string& type) {
  static const std::set<std::string> kHosted = {"web_search",
                                                "web_search_preview",
                                                "web_search_preview_2025_03_11",
                                                "file_search",
                                                "code_interpreter",
                                                "computer_use",
                                                "computer_use_preview",
                                                "image_generation",
                                                "mcp",
                                                "local_shell",
                                                "shell",
                                                "apply_patch"};
  return kHosted.contains(type);
}

// A tool's or namespace's name: letters, digits, '_' and '-', as OpenAI's
// are; a '.' would be taken for a namespace's, a space or a control
// token would cut the harmony header it goes in.
std::string tool_name(const json& t, const std::string& param) {
  const std::string name = required_string(t, "name", param);
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
      throw bad_param(param + ".name",
                      cat("'", param, ".name' ", shown(t["name"]), " may hold only letters, digits, '_' and '-'"));
  return name;
}

// A function tool in the flat shape ({type: "function", name, description,
// parameters, strict}; `strict` absent is false), in namespace `space`
// ("" for functions): its chat-shaped entry for the namespace's rendering,
// and what the constraint offers (under its qualified name).
json read_function(const json& t, const std::string& param, const std::string& space,
                   std::vector<OfferedFunction>& functions) {
  const std::string name = tool_name(t, param);
  json f = {{"name", name}};
  for (const char* key : {"description", "parameters"})
    if (t.contains(key) && !t[key].is_null()) f[key] = t[key];
  functions.push_back({space.empty() ? name : space + "." + name, boolean_field(t, "strict", false, param + ".strict"),
                       t.value("parameters", json()), param + ".parameters"});
  return {{"type", "function"}, {"function", f}};
}

// `tools`: functions, rendered as harmony's functions namespace; namespaces
// ({type: "namespace", name, description, tools: functions}: an agent's
// group of tools, an MCP server's), each rendered as a harmony namespace of
// its own, called as NAME.TOOL; hosted tools left out. None is rendered
// when tool_choice is "none".
std::vector<OfferedFunction> read_tools(const json& body, const ApiLimits& limits, const ToolChoice& choice,
                                        ResponsesRequest& r) {
  std::vector<OfferedFunction> functions;
  const auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return functions;
  if (!it->is_array()) throw bad_param("tools", "'tools' must be an array of tools");
  json flat = json::array();
  std::vector<std::pair<ToolNamespace, json>> spaces;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string param = cat("tools[", i, "]");
    if (!t.is_object()) throw bad_param(param, "'" + param + "' must be an object (a tool)");
    const std::string type = string_field(t, "type");
    if (type == "function") {
      flat.push_back(read_function(t, param, "", functions));
    } else if (type == "namespace") {
      ToolNamespace space{tool_name(t, param), string_field(t, "description"), ""};
      const auto inner = t.find("tools");
      if (inner == t.end() || !inner->is_array())
        throw bad_param(param + ".tools", "'" + param + ".tools' must be an array of function tools");
      json members = json::array();
      for (size_t j = 0; j < inner->size(); ++j) {
        const json& f = (*inner)[j];
        const std::string p = cat(param, ".tools[", j, "]");
        if (!f.is_object() || string_field(f, "type") != "function")
          throw bad_param(p + ".type", cat("'", p, ".type' ", f.is_object() ? shown(f.value("type", json())) : "",
                                           " is not supported in a namespace (only function)"));
        members.push_back(read_function(f, p, space.name, functions));
      }
      spaces.emplace_back(std::move(space), std::move(members));
    } else if (hosted_tool(type)) {
      if (std::find(r.omitted_tools.begin(), r.omitted_tools.end(), type) == r.omitted_tools.end())
        r.omitted_tools.push_back(type);
    } else {
      throw bad_param(param + ".type", cat("'", param, ".type' ", shown(t.value("type", json())),
                                           " is not supported by this server (function and namespace are; hosted "
                                           "tools such as web_search are left out)"));
    }
  }
  if (choice.mode == ToolChoice::Mode::none) return functions;
  // One bound for everything rendered: what cannot fit the context is refused.
  size_t left = limits.prompt_bytes();
  auto render = [&](const json& tools) {
    std::string body = render_functions(tools, left);
    left -= body.size();
    return body;
  };
  if (!flat.empty()) r.conversation.functions = render(flat);
  for (auto& [space, members] : spaces) {
    space.body = render(members);
    r.conversation.namespaces.push_back(std::move(space));
  }
  return functions;
}

// text.format: text (free), json_object, or json_schema ({type, name,
// schema, strict}, flat): the constraint's final content (kind text: free).
ContentSpec read_text_format(const json& body) {
  const auto text = body.find("text");
  if (text == body.end() || text->is_null()) return {};
  if (!text->is_object()) throw bad_param("text", "'text' must be an object");
  only_default(*text, "verbosity", "medium", "text.verbosity");
  const auto f = text->find("format");
  if (f == text->end() || f->is_null()) return {};
  return read_output_format(*f, "text.format", SchemaAt::format_itself);
}

std::string read_effort(const json& body) {
  const auto it = body.find("reasoning");
  if (it == body.end() || it->is_null()) return "medium";
  if (!it->is_object()) throw bad_param("reasoning", "'reasoning' must be an object");
  // gpt-oss writes no summaries: "auto" (Codex and other agents send it)
  // leaves the choice to the server, which gives none; asking for a kind of
  // summary is refused.
  only_default(*it, "summary", "auto", "reasoning.summary");
  only_default(*it, "generate_summary", "auto", "reasoning.generate_summary");
  const auto e = it->find("effort");
  if (e == it->end() || e->is_null()) return "medium";
  std::string effort = e->is_string() ? e->get<std::string>() : "";
  if (effort == "minimal") effort = "low";
  if (effort != "low" && effort != "medium" && effort != "high")
    throw bad_param("reasoning.effort", cat("'reasoning.effort' ", shown(*e), " is not low, medium or high"));
  return effort;
}

// `include`: whether reasoning items carry encrypted_content, the one
// inclusion tps makes (no logprobs, no tool results of its own).
bool read_include(const json& body) {
  const auto it = body.find("include");
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_array()) throw bad_param("include", "'include' must be an array of strings");
  bool reasoning = false;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& what = (*it)[i];
    if (what != "reasoning.encrypted_content")
      throw bad_param(cat("include[", i, "]"),
                      cat("'include[", i, "]' ", shown(what), " is not supported (only reasoning.encrypted_content)"));
    reasoning = true;
  }
  return reasoning;
}

// What the API defines and tps does not do, refused unless at its no-op value.
void refuse_unsupported(const json& body) {
  only_default(body, "background", false);
  only_default(body, "top_logprobs", 0);
  only_default(body, "truncation", "disabled");
  only_default(body, "conversation", nullptr);
  only_default(body, "prompt", nullptr);
  for (const char* chat_only : {"messages", "max_tokens", "response_format"})
    if (body.contains(chat_only))
      throw bad_param(chat_only, cat("'", chat_only, "' is chat completions'; the Responses API takes ",
                                     std::string(chat_only) == "messages"     ? "'input'"
                                     : std::string(chat_only) == "max_tokens" ? "'max_output_tokens'"
                                                                              : "'text.format'"));
}

}  // namespace

ResponsesRequest parse_responses_request(const json& body, const ApiLimits& limits, const std::string& ids) {
  if (!body.is_object()) throw bad_param("", "the request body must be a JSON object");
  ResponsesRequest r;
  check_model(body, limits.model_id);
  refuse_unsupported(body);
  integer_field(body, "max_tool_calls", 1, INT64_MAX, 1);  // at most one call an answer: harmony's <|call|> ends it
  const bool parallel = boolean_field(body, "parallel_tool_calls", true);
  r.stream = boolean_field(body, "stream", false);
  r.store = boolean_field(body, "store", true);
  r.encrypted_reasoning = read_include(body);
  r.sampler.temperature = static_cast<float>(number_field(body, "temperature", 0, 2, 1));
  r.sampler.top_p = static_cast<float>(number_field(body, "top_p", 0, 1, 1));
  if (r.sampler.top_p <= 0) throw bad_param("top_p", "'top_p' must be above 0");
  const int64_t max = integer_field(body, "max_output_tokens", 1, INT64_MAX, 0);
  r.max_new_tokens = static_cast<int>(std::min<int64_t>(max, limits.context));  // then the room (Server::submit)
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null()) {
    r.previous_response_id = string_field(body, "previous_response_id");
    if (r.previous_response_id.empty())
      throw bad_param("previous_response_id", "'previous_response_id' must be a non-empty string");
  }
  const auto instructions = body.find("instructions");
  if (instructions != body.end() && !instructions->is_null() && !instructions->is_string())
    throw bad_param("instructions", "'instructions' must be a string");
  r.conversation.instructions = string_field(body, "instructions");
  const auto metadata = body.find("metadata");
  if (metadata != body.end() && !metadata->is_null() && !metadata->is_object())
    throw bad_param("metadata", "'metadata' must be an object of strings");
  const std::string effort = read_effort(body);
  r.conversation.reasoning = effort;
  const ToolChoice choice = read_tool_choice(body);
  const std::vector<OfferedFunction> functions = read_tools(body, limits, choice, r);
  const ContentSpec asked = read_text_format(body);
  const bool free = asked.kind == ContentSpec::Kind::text;
  r.output = harmony_turn_constraint(free ? limits.default_final : asked, functions, choice, effort_budget(effort));
  read_input(body, r, ids);
  size_t bytes = r.conversation.instructions.size() + r.item_instructions.size() + r.conversation.functions.size();
  for (const HarmonyMessage& m : r.conversation.messages) bytes += m.content.size();
  check_prompt_bytes(bytes, limits, "input");
  auto given = [&](const char* key, json fallback) {
    const auto it = body.find(key);
    return it == body.end() || it->is_null() ? fallback : *it;
  };
  const json reasoning = given("reasoning", json::object());
  const json summary = reasoning.is_object() ? reasoning.value("summary", json()) : json();
  r.echo = {{"instructions", given("instructions", nullptr)},
            {"tools", given("tools", json::array())},
            {"tool_choice", given("tool_choice", "auto")},
            {"temperature", r.sampler.temperature},
            {"top_p", r.sampler.top_p},
            {"max_output_tokens", given("max_output_tokens", nullptr)},
            {"parallel_tool_calls", parallel},
            {"reasoning", {{"effort", effort}, {"summary", summary}}},
            {"text", {{"format", free ? json{{"type", "text"}} : body["text"]["format"]}}},
            {"metadata", given("metadata", json::object())},
            {"store", r.store},
            {"previous_response_id", given("previous_response_id", nullptr)},
            {"truncation", "disabled"},
            {"background", false},
            {"service_tier", "default"},
            {"top_logprobs", 0},
            {"max_tool_calls", given("max_tool_calls", nullptr)}};
  return r;
}

std::string qualified_name(const nlohmann::ordered_json& call) {
  const std::string name = string_field(call, "name"), space = string_field(call, "namespace");
  return space.empty() ? name : space + "." + name;
}

void name_function_outputs(ResponsesRequest& r, const std::map<std::string, std::string>& earlier) {
  for (size_t i = 0; i < r.conversation.messages.size(); ++i) {
    const std::string& call = r.output_calls[i];
    if (call.empty()) continue;
    std::string name;
    if (const auto a = r.input_calls.find(call); a != r.input_calls.end())
      name = a->second;
    else if (const auto b = earlier.find(call); b != earlier.end())
      name = b->second;
    else
      throw bad_param("input", cat("a function_call_output answers call_id '", call,
                                   "', which no function_call of this conversation made"));
    r.conversation.messages[i].role = tool_recipient(name);
  }
}

}  // namespace tps
