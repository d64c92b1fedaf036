// The Responses API's routes: POST /v1/responses (a turn: the stored
// conversation it follows, its input rendered after it, the output as
// items, stored for the next), GET and DELETE /v1/responses/{id}, GET
// /v1/responses/{id}/input_items.
#pragma once

#include "serve/api/job.h"
#include "serve/http/route.h"
#include "serve/responses/response_store.h"

namespace tps {

// `api` and `responses` outlive the routes (the server's; `api` is filled
// in once the model is ready).
void add_responses_routes(Routes& routes, const ApiContext& api, ResponseStore& responses);

}  // namespace tps
