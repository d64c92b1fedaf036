// The Messages API's routes: POST /v1/messages (a turn: the conversation
// the request carries, its earlier assistant turns rendered from the ids tps
// generated for them, the output as content blocks, whole or as Anthropic's
// stream of events) and POST /v1/messages/count_tokens. Errors are in
// Anthropic's shape.
#pragma once

#include "serve/api/job.h"
#include "serve/http/route.h"
#include "serve/messages/generated_turns.h"

namespace tps {

// `api` and `turns` outlive the routes (the server's; `api` is filled in
// once the model is ready).
void add_messages_routes(Routes& routes, const ApiContext& api, GeneratedTurns& turns);

}  // namespace tps
