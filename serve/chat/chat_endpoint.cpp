#include "serve/chat/chat_endpoint.h"

#include <httplib.h>

#include <ctime>
#include <memory>

#include "engine/sched/constraint.h"
#include "runtime/error.h"
#include "serve/api/job.h"
#include "serve/api/random_id.h"
#include "serve/chat/chat_request.h"
#include "serve/chat/chat_response.h"
#include "serve/chat/chat_text.h"
#include "serve/http/api_error.h"
#include "serve/http/sse.h"

namespace tps {

namespace {

// Serves one generation request (chat: harmony; else a raw completion).
// Throws ApiError.
void generate(const ApiContext& api, const nlohmann::ordered_json& body, bool chat, const httplib::Request& req,
              httplib::Response& res) {
  const Tokenizer& tok = *api.tokenizer;
  std::unique_ptr<GenerationRequest> request;
  std::vector<int32_t> prompt;
  if (chat) {
    auto r = std::make_unique<ChatRequest>(parse_chat_request(body, api.limits));
    prompt = render_conversation(r->conversation, [&tok](const std::string& s) { return tok.encode(s); });
    request = std::move(r);
  } else {
    auto r = std::make_unique<CompletionRequest>(parse_completion_request(body, api.limits));
    prompt = tok.encode(r->prompt, true);
    request = std::move(r);
  }
  check_output_constraint(request->output, *api.constraints);
  const GenerationRequest& r = *request;  // compiled here, not on the engine loop
  const int prompt_tokens = static_cast<int>(prompt.size());
  std::shared_ptr<Job> job = api.jobs->submit(std::move(prompt), r, "messages");
  const std::string n = random_id();
  auto shape = std::make_shared<const ChatResponse>(cat(chat ? "chatcmpl-" : "cmpl-", n), std::time(nullptr),
                                                    api.limits.model_id, chat, r.logprobs, r.include_usage);
  auto rt = std::make_shared<ChatText>(tok, chat, r.stop, r.logprobs ? r.top_logprobs : -1, cat("call_", n, "_"));
  auto finish_reason = [job, rt] {
    if (job->finish == "length") return "length";
    return rt->tool_calls().empty() ? "stop" : "tool_calls";
  };
  auto usage_of = [job, rt, prompt_tokens](int completion) {
    return usage_json(prompt_tokens, completion, job->reused, rt->reasoning_tokens());
  };

  if (!r.stream) {
    int completion = 0;
    job->collect([&](const Pick& p) {
      ++completion;
      rt->push(p);
      if (rt->stopped()) job->cancelled = true;
    });
    rt->finish();
    send_json(res, 200, shape->body(*rt, finish_reason(), usage_of(completion)));
    return;
  }

  // Streaming: server-sent events, one chunk per token that shows something.
  auto completion = std::make_shared<int>(0);
  Job::stream(job, res, req.version == "HTTP/1.0",
              {[shape] { return shape->first_event(); },
               [=](const Pick& p) {
                 ++*completion;
                 std::string out = shape->delta_events(*rt, rt->push(p));
                 if (rt->stopped()) job->cancelled = true;
                 return out;
               },
               [=] {
                 if (!job->error.empty())
                   return sse_event(ApiError(job->status, job->error).body()) + "data: [DONE]\n\n";
                 std::string out = shape->delta_events(*rt, rt->finish());  // before the reason is read
                 return out + shape->last_events(finish_reason(), usage_of(*completion));
               }});
}

}  // namespace

void add_chat_routes(Routes& routes, const ApiContext& api) {
  for (const bool chat : {true, false}) {
    const char* path = chat ? "/v1/chat/completions" : "/v1/completions";
    routes.post(path, path, RouteNeeds::new_work, [&api, chat](const httplib::Request& req, httplib::Response& res) {
      generate(api, parse_request_body(req.body), chat, req, res);
    });
  }
}

}  // namespace tps
