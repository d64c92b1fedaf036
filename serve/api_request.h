// The requests the server takes, read from their JSON bodies and checked:
// POST /v1/chat/completions (messages rendered as a harmony conversation,
// tools as its functions namespace) and POST /v1/completions (a raw
// prompt). Anything malformed, of the wrong type or out of range is an
// ApiError naming the parameter, before any work is queued.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/step/sampler.h"
#include "engine/text/harmony.h"

namespace tps {

// What the server was started with that requests are checked against.
struct ApiLimits {
  std::string model_id;  // the one model served ("gpt-oss-20b", from the file name)
  int context = 4096;    // positions per sequence
};

// What both endpoints share.
struct GenerationRequest {
  bool stream = false, include_usage = false;
  SamplerParams sampler;
  bool seed_given = false;
  int max_tokens = 0;  // 0: until the context is full
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
};

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
