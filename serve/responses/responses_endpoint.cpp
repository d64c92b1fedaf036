#include "serve/responses/responses_endpoint.h"

#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "engine/sched/constraint.h"
#include "engine/text/conversation_ids.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "serve/api/random_id.h"
#include "serve/api/request_fields.h"
#include "serve/http/api_error.h"
#include "serve/http/api_keys.h"
#include "serve/http/sse.h"
#include "serve/responses/responses_output.h"
#include "serve/responses/responses_request.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;

ApiError not_found(const std::string& id, const std::string& param = "") {
  return ApiError(404,
                  cat("Response with id '", id, "' not found (never made, deleted, made with store: false, or ",
                      "let go for --responses-max / --responses-mib)"),
                  param, "invalid_request_error", param.empty() ? "not_found" : "previous_response_not_found");
}

// One turn as the request's thread follows it: the request's settings the
// response object repeats (echoed_request), the conversation before the
// output (history), the output.
struct TurnState {
  TurnState(const Tokenizer& tok, std::string id, std::string ids, std::vector<int32_t> tail, ReasoningItems reasoning)
      : id(std::move(id)), output(tok, std::move(ids), std::move(tail), reasoning) {}
  // A response to store is known to the store from its start (a DELETE
  // cancels it) until its turn ends, stored or not.
  ~TurnState() {
    if (store) store->finish(id, nullptr);
  }
  TurnState(const TurnState&) = delete;
  TurnState& operator=(const TurnState&) = delete;
  std::string id;
  int64_t created = std::time(nullptr);
  std::string model;
  json echoed_request;
  ResponseStore* store = nullptr;  // null: store false
  StoredResponse history;          // the conversation up to the output; input items; calls; carried instructions
  ResponseOutput output;
  int prompt_tokens = 0, completion = 0;
  int64_t sequence = 0;  // the next stream event's

  json usage(int cached) const {
    return {{"input_tokens", prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", cached}}},
            {"output_tokens", completion},
            {"output_tokens_details", {{"reasoning_tokens", output.reasoning_tokens()}}},
            {"total_tokens", prompt_tokens + completion}};
  }
  // The response object; status in_progress (no output yet), completed or incomplete.
  json object(const std::string& status, int cached) const {
    json o = {{"id", id},
              {"object", "response"},
              {"created_at", created},
              {"status", status},
              {"error", nullptr},
              {"incomplete_details", status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json()},
              {"model", model},
              {"output", status == "in_progress" ? json::array() : json(output.items())}};
    for (const auto& [key, value] : echoed_request.items()) o[key] = value;
    o["usage"] = status == "in_progress" ? json() : usage(cached);
    return o;
  }
  std::string event(json e) {
    e["sequence_number"] = sequence++;
    return sse_event(e, e["type"].get<std::string>());
  }
  // Stored for a follow-up (when asked): the conversation with the output
  // after it, harmony's rule applied.
  void store_for_followup(const json& response) const {
    auto r = std::make_shared<StoredResponse>(history);
    r->response = response;
    r->messages.insert(r->messages.end(), output.messages().begin(), output.messages().end());
    drop_earlier_reasoning(r->messages);
    for (const json& item : output.items())
      if (item["type"] == "function_call") r->calls[item["call_id"]] = qualified_name(item);
    store->finish(id, std::move(r));
  }
};

// Cancelled: deleted while it was generated (a client that went away reads nothing).
const char* final_status(const std::string& finish) {
  return finish == "length" ? "incomplete" : finish == "cancelled" ? "cancelled" : "completed";
}

// The last stream event's type: the spec has none for "cancelled", so a
// cancelled response ends as an incomplete one does, its status saying why.
std::string final_event(const std::string& status) {
  return status == "cancelled" ? "response.incomplete" : "response." + status;
}

void create_response(const ApiContext& api, ResponseStore& responses, const json& body, const httplib::Request& req,
                     httplib::Response& res) {
  const Tokenizer& tok = *api.tokenizer;
  const std::string owner = api.keys->owner(req), ids = random_id();
  ResponsesRequest r = parse_responses_request(body, api.limits, ids);
  if (!r.omitted_tools.empty()) {
    // Served without them, and said: to the client in a header, to the
    // operator in the log.
    std::string types;
    for (const std::string& t : r.omitted_tools) types += (types.empty() ? "" : ",") + t;
    res.set_header("X-Tps-Omitted-Tools", types);
    log_info("resp_", ids, ": hosted tools left out (tps cannot run them): ", types);
  }
  std::shared_ptr<const StoredResponse> previous;
  if (!r.previous_response_id.empty()) {
    previous = responses.get(r.previous_response_id, owner, true);
    if (!previous) throw not_found(r.previous_response_id, "previous_response_id");
  }
  StoredResponse history;
  if (previous) history.messages = previous->messages, history.calls = previous->calls;
  if (previous) history.item_instructions = previous->item_instructions;
  name_function_outputs(r, history.calls);
  history.calls.insert(r.input_calls.begin(), r.input_calls.end());
  if (!r.item_instructions.empty())
    history.item_instructions += (history.item_instructions.empty() ? "" : "\n\n") + r.item_instructions;
  history.input_items = r.input_items;
  // `instructions` is this request's alone; system and developer items stay
  // with the conversation.
  Conversation c = r.conversation;
  if (!history.item_instructions.empty())
    c.instructions += (c.instructions.empty() ? "" : "\n\n") + history.item_instructions;
  RenderedConversation parts = render_parts(c, [&tok](const std::string& s) { return tok.encode(s); });
  history.messages.insert(history.messages.end(), parts.messages.begin(), parts.messages.end());
  drop_earlier_reasoning(history.messages);
  std::vector<int32_t> prompt = join_prompt(parts.header, history.messages, parts.tail);
  check_output_constraint(r.output, *api.constraints);  // compiled here, not on the engine loop
  const int prompt_tokens = static_cast<int>(prompt.size());
  std::shared_ptr<Job> job = api.jobs->submit(std::move(prompt), r, "input");

  auto turn = std::make_shared<TurnState>(tok, "resp_" + ids, ids, parts.tail,
                                          r.encrypted_reasoning ? ReasoningItems::text_and_blob : ReasoningItems::text);
  turn->model = api.limits.model_id, turn->echoed_request = std::move(r.echo);
  turn->history = std::move(history), turn->prompt_tokens = prompt_tokens;
  if (r.store) {
    turn->store = &responses;
    responses.begin(turn->id, owner, [weak = std::weak_ptr<Job>(job)] {
      if (const std::shared_ptr<Job> j = weak.lock()) j->cancelled = true;
    });
  }
  // The end: the object, stored when asked.
  auto finish = [turn, job] {
    const std::string status = final_status(job->finish);
    const json response = turn->object(status, job->reused);
    if (turn->store) turn->store_for_followup(response);
    return response;
  };

  if (!r.stream) {
    job->collect([&](const Pick& p) {
      ++turn->completion;
      turn->output.push(p.id);
    });
    turn->output.finish(job->finish == "length");
    send_ordered_json(res, 200, finish());
    return;
  }

  // Streaming: the spec's events, each numbered.
  Job::stream(
      job, res, req.version == "HTTP/1.0",
      {[turn] {
         const json started = turn->object("in_progress", 0);
         std::string out = turn->event({{"type", "response.created"}, {"response", started}});
         return out + turn->event({{"type", "response.in_progress"}, {"response", started}});  // numbered after
       },
       [turn](const Pick& p) {
         ++turn->completion;
         std::string out;
         for (json& e : turn->output.push(p.id)) out += turn->event(std::move(e));
         return out;
       },
       [=] {
         if (!job->error.empty())
           return turn->event({{"type", "error"}, {"code", nullptr}, {"message", job->error}, {"param", nullptr}});
         std::string out;
         for (json& e : turn->output.finish(job->finish == "length")) out += turn->event(std::move(e));
         const json response = finish();
         return out + turn->event({{"type", final_event(response["status"])}, {"response", response}});
       }});
}

void list_input_items(const ApiContext& api, ResponseStore& responses, const std::string& id,
                      const httplib::Request& req, httplib::Response& res) {
  const std::shared_ptr<const StoredResponse> r = responses.get(id, api.keys->owner(req), false);
  if (!r) throw not_found(id);
  const std::string order = req.has_param("order") ? req.get_param_value("order") : "desc";
  if (order != "asc" && order != "desc") throw bad_param("order", "'order' is '" + order + "', expected asc or desc");
  int64_t limit = 20;
  if (req.has_param("limit")) {
    const std::string text = req.get_param_value("limit");
    char* end = nullptr;
    limit = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end || limit < 1 || limit > 100)
      throw bad_param("limit", "'limit' is '" + text + "', expected an integer 1 to 100");
  }
  json items = json::array();
  for (const json& item : r->input_items) items.push_back(item);
  if (order == "desc") std::reverse(items.begin(), items.end());
  size_t from = 0;
  if (req.has_param("after")) {
    const std::string after = req.get_param_value("after");
    while (from < items.size() && items[from]["id"] != after) ++from;
    if (from == items.size()) throw bad_param("after", "'after' names no input item of response '" + id + "'");
    ++from;
  }
  json page = json::array();
  for (size_t i = from; i < items.size() && static_cast<int64_t>(page.size()) < limit; ++i) page.push_back(items[i]);
  const bool more = from + page.size() < items.size();
  send_ordered_json(res, 200,
                    json{{"object", "list"},
                         {"data", page},
                         {"first_id", page.empty() ? json() : page.front()["id"]},
                         {"last_id", page.empty() ? json() : page.back()["id"]},
                         {"has_more", more}});
}

}  // namespace

void add_responses_routes(Routes& routes, const ApiContext& api, ResponseStore& responses) {
  routes.post("/v1/responses", "/v1/responses", RouteNeeds::new_work,
              [&api, &responses](const httplib::Request& req, httplib::Response& res) {
                create_response(api, responses, parse_request_body(req.body), req, res);
              });
  routes.get(R"(/v1/responses/([^/]+))", "/v1/responses/{id}", RouteNeeds::nothing,
             [&api, &responses](const httplib::Request& req, httplib::Response& res) {
               const std::shared_ptr<const StoredResponse> r =
                   responses.get(req.matches[1], api.keys->owner(req), false);
               if (!r) throw not_found(req.matches[1]);
               send_ordered_json(res, 200, r->response);
             });
  routes.remove(R"(/v1/responses/([^/]+))", "/v1/responses/{id}", RouteNeeds::nothing,
                [&api, &responses](const httplib::Request& req, httplib::Response& res) {
                  const std::string id = req.matches[1];
                  if (!responses.erase(id, api.keys->owner(req))) throw not_found(id);
                  send_ordered_json(res, 200, json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
                });
  routes.get(R"(/v1/responses/([^/]+)/input_items)", "/v1/responses/{id}/input_items", RouteNeeds::nothing,
             [&api, &responses](const httplib::Request& req, httplib::Response& res) {
               list_input_items(api, responses, req.matches[1], req, res);
             });
}

}  // namespace tps
