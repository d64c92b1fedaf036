// POST /v1/messages (and /v1/messages/count_tokens), Anthropic's Messages
// API, read from its JSON body and checked before any work is queued (an
// ApiError naming the parameter): `system` (a string or text blocks);
// `messages` of user and assistant turns whose content is a string or blocks
// -- text, tool_use, tool_result, thinking (harmony's analysis of that
// assistant turn) -- as harmony messages; `tools` ({name, description,
// input_schema}) as harmony's functions; `tool_choice` (auto, any, tool,
// none) and the tools' schemas as the output constraint; `max_tokens`,
// `temperature`, `top_p`, `top_k`, `stop_sequences`, `thinking` (enabled
// with budget_tokens, or disabled: low effort, not shown), `metadata`,
// `stream`. Fields it does not know, or knows and does not do, are refused
// by name.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/text/harmony.h"
#include "serve/api/generation_request.h"

namespace tps {

class ConstraintCache;

struct MessagesRequest : GenerationRequest {
  Conversation conversation;
  // Each assistant turn of `messages`: its harmony messages
  // (conversation.messages[first, end)), and the key its content has in the
  // server's store of generated turns (serve/messages/turn_ids.h).
  struct AssistantTurn {
    size_t first = 0, end = 0;
    std::string key;
  };
  std::vector<AssistantTurn> assistant_turns;
  bool show_thinking = true;  // thinking: disabled hides it
  int thinking_budget = 0;    // thinking.budget_tokens; 0: the effort's
  // The tools, each held to its input_schema when the grammar engine can
  // (tool.strict absent: best effort, as Anthropic's non-strict tools are;
  // check_output_constraint) or must (strict: true); tool_choice; the
  // analysis's budget.
  std::vector<OfferedFunction> functions;
  ToolChoice choice;
  int reasoning_budget = 0;
};

// count_only: /v1/messages/count_tokens's body (no max_tokens, no sampling).
MessagesRequest parse_messages_request(const nlohmann::ordered_json& body, const ApiLimits& limits,
                                       bool count_only = false);

// The key of an assistant turn's harmony messages: the same for the turn as
// the response showed it and as a client sends it back.
std::string assistant_turn_key(const std::vector<HarmonyMessage>& messages);

// The harmony messages of an assistant turn's content blocks (a response's
// own content reads back the same way). Throws ApiError naming `param`.
std::vector<HarmonyMessage> assistant_messages(const nlohmann::ordered_json& content, const std::string& param);

}  // namespace tps
