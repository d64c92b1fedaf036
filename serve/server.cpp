#include "serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <optional>
#include <random>

#include "engine/sched/drafter.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "serve/chat/chat_endpoint.h"
#include "serve/http/api_error.h"
#include "serve/http/connection_server.h"
#include "serve/http/request_log.h"
#include "serve/messages/messages_endpoint.h"
#include "serve/responses/responses_endpoint.h"
#include "serve/web_page.h"  // generated: the embedded web page

namespace tps {

using nlohmann::json;

namespace {

// The Messages API's clients read Anthropic's error bodies, on its routes
// and on what is refused before any route runs.
ErrorShape error_shape_of(const std::string& path) {
  return path.starts_with("/v1/messages") ? ErrorShape::anthropic : ErrorShape::openai;
}

const char* const kConstraintGaveUp =
    "the output's constraint (response_format, text.format, strict tools or tool_choice) needed more work for one "
    "token than the per-token limit allows: its schema or grammar can match in too many ways at once; simplify it";
}  // namespace

Server::Server(const ServeOptions& o)
    : opt_(o),
      keys_(o.api_keys),
      responses_(static_cast<size_t>(std::max(1, o.responses_max)), static_cast<size_t>(std::max(1, o.responses_mib))
                                                                        << 20) {
  if (o.port < 0 || o.port > 65535) throw InputError(cat("--port ", o.port, ": expected 0..65535"));
  if (o.max_queue < 1 || o.max_queue > ServeOptions::kMaxQueue)
    throw InputError(cat("--max-queue ", o.max_queue, ": expected 1..", ServeOptions::kMaxQueue));
  if (!(o.request_seconds > 0 && o.request_seconds <= ServeOptions::kMaxRequestSeconds))
    throw InputError(cat("--timeout ", o.request_seconds, ": expected seconds above 0 and at most ",
                         ServeOptions::kMaxRequestSeconds));
  if (o.responses_max < 1 || o.responses_max > ServeOptions::kMaxResponses)
    throw InputError(cat("--responses-max ", o.responses_max, ": expected 1..", ServeOptions::kMaxResponses));
  if (o.responses_mib < 1 || o.responses_mib > ServeOptions::kMaxResponsesMib)
    throw InputError(cat("--responses-mib ", o.responses_mib, ": expected 1..", ServeOptions::kMaxResponsesMib));
  for (const std::string& key : o.api_keys)
    if (key.empty() || std::any_of(key.begin(), key.end(), [](char c) { return c <= ' ' || c == 0x7f; }))
      throw InputError("--api-key: a key is one or more characters without spaces or controls");
  ConnectionLimits limits;
  limits.max_connections = o.max_connections, limits.max_body_bytes = o.max_body_bytes;
  http_ = std::make_unique<ConnectionServer>(limits);
  api_.jobs = this, api_.keys = &keys_;
  route();
}

Server::~Server() {
  // Requests that will not run now (start-up failed, or the engine loop
  // threw) are answered, so that their threads end and the connections close.
  std::deque<std::shared_ptr<Job>> unanswered;
  {
    std::lock_guard<std::mutex> lock(inbox_m_);
    closed_ = true;
    unanswered.swap(inbox_);
  }
  for (const auto& [seq, job] : live_) unanswered.push_back(job);
  for (const std::shared_ptr<Job>& job : unanswered) job->fail(503, "the server is shutting down");
  http_->stop_serving();
}

void Server::listen() { port_ = http_->start(opt_.host, opt_.port); }

void Server::ready(Generator& generator, const Tokenizer& tokenizer, const ApiLimits& limits, json status) {
  gen_ = &generator, status_ = std::move(status);
  api_.tokenizer = &tokenizer, api_.constraints = &generator.constraints(), api_.limits = limits;
  tokenizer.prepare_encoding();
  state_.ready = true;
}

void Server::route() {
  httplib::Server& s = *http_;
  routes_ = std::make_unique<Routes>(s, state_, metrics_.requests(), opt_.log_requests);
  // A key on every /v1 route (api_keys.h: as OpenAI's clients or
  // Anthropic's send it); the refusal in the shape of the route's API.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!keys_.required() || !req.path.starts_with("/v1/") || keys_.admits(req))
      return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, 401,
              error_body(ApiError(401, "a valid API key is needed (Authorization: Bearer KEY, or x-api-key: KEY)", "",
                                  "authentication_error", "invalid_api_key"),
                         error_shape_of(req.path)));
    metrics_.request(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // What httplib answers itself (no route, a body too large, ...) gets an
  // error body too.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message =
        res.status == 404 ? "no such route: " + req.method + " " + req.path : cat("HTTP status ", res.status);
    send_json(
        res, res.status,
        error_body(ApiError(res.status, message, "", res.status == 404 ? "not_found_error" : "invalid_request_error"),
                   error_shape_of(req.path)));
  });
  // Not counted (nor wrapped): what monitors and the web page poll.
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (state_.ready)
      send_json(res, 200, {{"status", "ok"}});
    else
      send_json(res, 503, ApiError(503, "Loading model", "", "unavailable_error").body());
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    metrics_.set_response_store(responses_.stats());
    res.set_content(metrics_.prometheus(), "text/plain; version=0.0.4");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(kWebPage, "text/html"); });
  s.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  s.Get("/v1/status", [this](const httplib::Request&, httplib::Response& res) {
    if (!state_.ready) return send_json(res, 200, {{"ready", false}});
    metrics_.set_response_store(responses_.stats());
    json j = status_;
    j["ready"] = true;
    j.update(metrics_.status());
    send_json(res, 200, j);
  });
  // What ready() set is read only once the model is: RouteNeeds says so.
  routes_->get("/v1/models", "/v1/models", RouteNeeds::model, [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", api_.limits.model_id},
                                      {"object", "model"},
                                      {"created", status_.value("started", 0)},
                                      {"owned_by", "tps"},
                                      {"max_model_len", api_.limits.context}}})}});
  });
  add_chat_routes(*routes_, api_);
  add_responses_routes(*routes_, api_, responses_);
  add_messages_routes(*routes_, api_, messages_);
}

std::shared_ptr<Job> Server::submit(std::vector<int32_t> prompt, const GenerationRequest& r, const char* param) {
  if (static_cast<int>(prompt.size()) >= api_.limits.context)
    throw ApiError(400,
                   cat("the prompt is ", prompt.size(), " tokens; the context holds ", api_.limits.context,
                       ", with room for at least one generated token"),
                   param, "invalid_request_error", "context_length_exceeded");
  if (queued_ >= opt_.max_queue)
    throw ApiError(503, cat("the queue is full (", opt_.max_queue, " requests wait); try again"), "",
                   "unavailable_error");
  std::optional<std::vector<std::vector<int32_t>>> draft_sources;  // here, not on the engine loop
  if (gen_->scheduler().options().draft_tokens > 0) draft_sources = escaped_messages(prompt, *api_.tokenizer);
  std::unique_lock<std::mutex> lock(inbox_m_);
  if (closed_) throw ApiError(503, "the server is shutting down", "", "unavailable_error");
  auto job = std::make_shared<Job>();
  job->params.sampler = r.sampler;
  if (!r.seed_given) job->params.sampler.seed = std::random_device{}();
  const int room = api_.limits.context - static_cast<int>(prompt.size());
  job->params.max_new_tokens = r.max_new_tokens > 0 ? std::min(r.max_new_tokens, room) : room;
  job->params.top_logprobs = r.logprobs ? std::max(1, r.top_logprobs) : 0;
  job->params.constraint = r.output;
  job->params.draft_sources = std::move(draft_sources);
  job->prompt = std::move(prompt);
  job->deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.request_seconds));
  if (const std::shared_ptr<RequestRecord> record = RequestRecord::current())
    record->set_work([job, since = record->start()] { return job->describe(since); });
  ++queued_;
  inbox_.push_back(job);
  lock.unlock();
  inbox_cv_.notify_one();
  return job;
}

Generator::Events Server::events() {
  Generator::Events ev;
  ev.between_steps = [this](bool idle) { return between_steps(idle); };
  ev.token = [this](int seq, const Pick& p, SequenceEnd end) {
    std::shared_ptr<Job> job = live_.at(seq);
    if (!job->started) {
      job->started = true;
      --queued_;
      job->reused = gen_->scheduler().sequence(seq).reused;
      metrics_.prompt_tokens(static_cast<int64_t>(job->prompt.size()), job->reused);
    }
    if (end == SequenceEnd::constraint) {  // no token comes with it
      job->fail(400, kConstraintGaveUp);
      live_.erase(seq);
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(job->m);
      job->picks.push_back(p);
      if (job->generated++ == 0) job->first_token = Clock::now();
      job->drafted_taken = gen_->scheduler().sequence(seq).taken;
    }
    job->cv.notify_all();
    metrics_.generated_token();
    // The generator's reasons (a full context is a "length" end to the
    // API, as OpenAI reports it), then the server's own.
    const char* why = end == SequenceEnd::stop       ? "stop"
                      : end != SequenceEnd::none     ? "length"
                      : job->cancelled               ? "cancelled"
                      : Clock::now() > job->deadline ? "length"
                                                     : nullptr;
    if (!why) return true;
    job->end(why);
    live_.erase(seq);
    return false;
  };
  ev.waiting = [](int, const std::string&) {};
  return ev;
}

bool Server::between_steps(bool idle) {
  std::deque<std::shared_ptr<Job>> arrived;
  {
    std::lock_guard<std::mutex> lock(inbox_m_);
    arrived.swap(inbox_);
  }
  for (const std::shared_ptr<Job>& job : arrived) {
    try {
      job->seq = gen_->add(job->prompt, job->params);
      live_[job->seq] = job;
    } catch (const InputError& e) {
      --queued_;
      job->fail(400, e.what());
    }
  }
  // Requests not yet started whose client left or whose time ran out; on a
  // stop, every request: a stop ends the server within a step, not after
  // the longest answer's last token.
  const bool stopping = state_.stopping;
  for (auto it = live_.begin(); it != live_.end();) {
    const std::shared_ptr<Job>& job = it->second;
    const bool ends = stopping || (!job->started && (job->cancelled || Clock::now() > job->deadline));
    if (ends && gen_->cancel(it->first)) {
      if (!job->started) --queued_;
      if (stopping)
        job->fail(503, "the server is shutting down");
      else
        job->end(job->cancelled ? "cancelled" : "length");
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
  const Scheduler& s = gen_->scheduler();
  const DiskTier::Stats& disk = gen_->disk().stats();
  metrics_.set_steps(gen_->stats().steps, gen_->stats().tokens);
  metrics_.set_load(s.waiting(), s.running(), s.blocks().held(BlockKind::full), s.blocks().cached_idle(BlockKind::full),
                    s.blocks().total(BlockKind::full));
  metrics_.set_prompt_cache(PromptCacheStats{.full_blocks = s.tier().slots(BlockKind::full),
                                             .sliding_blocks = s.tier().slots(BlockKind::sliding),
                                             .full_used = s.tier().used(BlockKind::full),
                                             .bytes = gen_->tier().bytes(),
                                             .max_bytes = gen_->tier().capacity(),
                                             .saved = s.tier_stats().saved,
                                             .restored = s.tier_stats().restored,
                                             .evicted = s.tier().evictions(),
                                             .hits = s.tier_stats().hits,
                                             .misses = s.tier_stats().misses,
                                             .disk = gen_->disk().on(),
                                             .disk_files = disk.files,
                                             .disk_bytes = disk.bytes,
                                             .disk_loaded = disk.loaded,
                                             .disk_written = disk.written,
                                             .disk_write_failures = disk.write_failures});
  const Scheduler::DraftStats& d = s.draft_stats();
  metrics_.set_speculation(SpeculationStats{
      .verifies = d.verifies, .drafted = d.drafted, .taken = d.taken, .corpus_tokens = s.draft_corpus().size()});
  if (state_.stopping && live_.empty()) {
    std::lock_guard<std::mutex> lock(inbox_m_);
    if (inbox_.empty()) return false;
  }
  if (idle && live_.empty()) {
    std::unique_lock<std::mutex> lock(inbox_m_);
    inbox_cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return !inbox_.empty() || state_.stopping; });
  }
  return true;
}

}  // namespace tps
