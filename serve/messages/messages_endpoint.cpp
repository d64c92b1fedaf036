#include "serve/messages/messages_endpoint.h"

#include <httplib.h>

#include <memory>

#include "engine/sched/constraint.h"
#include "engine/text/conversation_ids.h"
#include "runtime/error.h"
#include "serve/api/random_id.h"
#include "serve/api/request_fields.h"
#include "serve/http/api_error.h"
#include "serve/http/sse.h"
#include "serve/messages/messages_output.h"
#include "serve/messages/messages_request.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

// One turn as the request's thread follows it.
struct Turn {
  Turn(const Tokenizer& tok, std::string ids, std::vector<int32_t> tail, const MessagesRequest& r)
      : id("msg_" + ids), output(tok, ids, std::move(tail), r.show_thinking, r.stop) {}
  std::string id, model;
  MessagesOutput output;
  int prompt_tokens = 0, completion = 0;

  json usage(int reused) const {
    return {{"input_tokens", prompt_tokens - reused},  // Anthropic's: what the cache did not hold
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", reused},
            {"output_tokens", completion}};
  }
  json message(const json& content, const json& stop_reason, const json& stop_sequence, int reused) const {
    return {{"id", id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model},
            {"content", content},
            {"stop_reason", stop_reason},
            {"stop_sequence", stop_sequence},
            {"usage", usage(reused)}};
  }
  // Sent before the engine loop has looked the prompt up in the cache: its
  // usage counts the whole prompt as input; message_delta's (whole-message
  // totals, which Anthropic's clients take over) says what the cache held.
  std::string start() const {
    const json m = message(json::array(), nullptr, nullptr, 0);
    return sse_event(json{{"type", "message_start"}, {"message", m}}, "message_start");
  }
  static std::string events(const std::vector<json>& list) {
    std::string out;
    for (const json& e : list) out += sse_event(e, e["type"].get<std::string>());
    return out;
  }
  // Kept for a follow-up that sends this turn back.
  void remember(GeneratedTurns& turns) const {
    if (output.content().empty()) return;
    turns.put(assistant_turn_key(assistant_messages(output.content(), "content")), output.messages());
  }
};

void create_message(const ApiContext& api, GeneratedTurns& turns, const json& body, const httplib::Request& req,
                    httplib::Response& res) {
  const Tokenizer& tok = *api.tokenizer;
  MessagesRequest r = parse_messages_request(body, api.limits);
  std::vector<int32_t> tail;
  std::vector<int32_t> prompt = render_prompt(
      r, [&tok](const std::string& s) { return tok.encode(s); }, turns, tail);
  check_output_constraint(r.output, *api.constraints);  // compiled here, not on the engine loop
  const int prompt_tokens = static_cast<int>(prompt.size());
  std::shared_ptr<Job> job = api.jobs->submit(std::move(prompt), r, "messages");
  auto turn = std::make_shared<Turn>(tok, random_id(), std::move(tail), r);
  turn->model = api.limits.model_id, turn->prompt_tokens = prompt_tokens;

  if (!r.stream) {
    job->collect([&](const Pick& p) {
      ++turn->completion;
      turn->output.push(p.id);
      if (turn->output.stopped()) job->cancelled = true;
    });
    turn->output.finish();
    turn->remember(turns);
    send_ordered_json(res, 200,
                      turn->message(turn->output.content(), turn->output.stop_reason(job->finish == "length"),
                                    turn->output.stop_sequence(), job->reused));
    return;
  }

  // Streaming: Anthropic's events, named by their type; ping while waiting.
  Job::stream(
      job, res, req.version == "HTTP/1.0",
      {[turn] { return turn->start(); },
       [=](const Pick& p) {
         ++turn->completion;
         std::string out = Turn::events(turn->output.push(p.id));
         if (turn->output.stopped()) job->cancelled = true;
         return out;
       },
       [=, &turns] {
         if (!job->error.empty()) return sse_event(ApiError(job->status, job->error).anthropic_body(), "error");
         std::string out = Turn::events(turn->output.finish());
         turn->remember(turns);
         const json delta = {{"type", "message_delta"},
                             {"delta",
                              {{"stop_reason", turn->output.stop_reason(job->finish == "length")},
                               {"stop_sequence", turn->output.stop_sequence()}}},
                             {"usage", turn->usage(job->reused)}};
         return out + sse_event(delta, "message_delta") + sse_event(json{{"type", "message_stop"}}, "message_stop");
       },
       [] {
         return sse_event(json{{"type", "ping"}}, "ping");
       }});
}

void count_tokens(const ApiContext& api, const GeneratedTurns& turns, const json& body, httplib::Response& res) {
  const MessagesRequest r = parse_messages_request(body, api.limits, true);
  std::vector<int32_t> tail;
  const std::vector<int32_t> prompt = render_prompt(
      r, [&api](const std::string& s) { return api.tokenizer->encode(s); }, turns, tail);
  send_ordered_json(res, 200, json{{"input_tokens", prompt.size()}});
}

}  // namespace

void add_messages_routes(Routes& routes, const ApiContext& api, GeneratedTurns& turns) {
  routes.post(
      "/v1/messages", "/v1/messages", RouteNeeds::new_work,
      [&api, &turns](const httplib::Request& req, httplib::Response& res) {
        create_message(api, turns, parse_request_body(req.body), req, res);
      },
      ErrorShape::anthropic);
  routes.post(
      "/v1/messages/count_tokens", "/v1/messages/count_tokens", RouteNeeds::model,
      [&api, &turns](const httplib::Request& req, httplib::Response& res) {
        count_tokens(api, turns, parse_request_body(req.body), res);
      },
      ErrorShape::anthropic);
}

}  // namespace tps
