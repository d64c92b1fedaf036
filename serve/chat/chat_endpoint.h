// The chat API's routes: POST /v1/chat/completions (harmony: messages in,
// reasoning, content and tool calls out) and POST /v1/completions (a raw
// prompt, raw text out), each answered whole or as a stream of server-sent
// events. A request is read and checked (chat_request.h), its constraint
// compiled, its prompt queued to the engine loop, and its tokens turned
// into the answer (chat_text.h, chat_response.h) on its own thread.
#pragma once

#include "serve/api/job.h"
#include "serve/http/route.h"

namespace tps {

// `api` outlives the routes (the server's; filled in once the model is ready).
void add_chat_routes(Routes& routes, const ApiContext& api);

}  // namespace tps
