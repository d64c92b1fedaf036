// POST /v1/responses, read from its JSON body and checked before any work
// is queued (an ApiError naming the parameter): `input` as a string or
// items -- messages (user, system, developer, assistant; content a string
// or input_text/output_text parts), function_call, function_call_output,
// reasoning (its text, or the encrypted_content tps made of it) -- as
// harmony messages; `instructions`; function tools in the Responses API's
// flat shape, namespaces of them, hosted tools left out; tool_choice; text.format, strict tools and tool_choice as the
// output constraint (serve/api/output_constraint.h); sampling,
// max_output_tokens, reasoning.effort, store, previous_response_id,
// include (reasoning.encrypted_content: serve/api/reasoning_blob.h), stream.
// Fields the API defines that would change the answer and that tps does not
// do are refused by name.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/text/harmony.h"
#include "serve/api/generation_request.h"

namespace tps {

struct ResponsesRequest : GenerationRequest {
  std::string previous_response_id;  // "": none
  bool store = true;
  bool encrypted_reasoning = false;  // include: ["reasoning.encrypted_content"]
  // Reasoning, functions and `instructions` (not carried to a follow-up, as
  // the API says); the messages of this request's input. A
  // function_call_output's role is "functions." until name_function_outputs.
  Conversation conversation;
  std::string item_instructions;                   // the text of system and developer input items (carried over)
  std::vector<std::string> output_calls;           // per message: the call_id a function_call_output answers
  std::map<std::string, std::string> input_calls;  // call_id -> qualified name, of this input's function_calls
  std::vector<std::string> omitted_tools;          // the types of the hosted tools left out (web_search, ...)
  nlohmann::ordered_json input_items = nlohmann::ordered_json::array();  // the input as items with ids
  nlohmann::ordered_json echo;  // the settings the response object repeats (instructions, tools, text, ...)
};

// A function_call item's tool, qualified by its `namespace` when it has
// one ("f", "multi_agent_v1.spawn"; engine/text/harmony.h).
std::string qualified_name(const nlohmann::ordered_json& call);

// ids: what the input items' ids are made of when they have none.
ResponsesRequest parse_responses_request(const nlohmann::ordered_json& body, const ApiLimits& limits,
                                         const std::string& ids);

// Gives each function_call_output the name of the call it answers, from this
// input's calls and `earlier` (call_id -> name, of the conversation so far).
// ApiError 400 naming the item for a call_id no call made.
void name_function_outputs(ResponsesRequest& r, const std::map<std::string, std::string>& earlier);

}  // namespace tps
