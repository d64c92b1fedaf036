// The chat API's requests, read from their JSON bodies and checked:
// POST /v1/chat/completions (messages rendered as a harmony conversation,
// tools as its functions namespace, what the output must be as a
// constraint) and POST /v1/completions (a raw prompt). Anything malformed,
// of the wrong type or out of range is an ApiError naming the parameter,
// before any work is queued.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/text/harmony.h"
#include "serve/api/generation_request.h"

namespace tps {

struct ChatRequest : GenerationRequest {
  Conversation conversation;
  bool tools = false;  // the request offered functions
};

struct CompletionRequest : GenerationRequest {
  std::string prompt;
};

ChatRequest parse_chat_request(const nlohmann::ordered_json& body, const ApiLimits& limits);
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body, const ApiLimits& limits);

}  // namespace tps
