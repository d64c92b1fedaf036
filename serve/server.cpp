#include "serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <ctime>
#include <random>

#include "runtime/error.h"
#include "runtime/log.h"
#include "serve/api_error.h"
#include "serve/api_response.h"
#include "serve/connection_server.h"
#include "serve/response_text.h"
#include "serve/server_job.h"
#include "serve/web_page.h"  // generated: the embedded web page

namespace tps {

using nlohmann::json;

namespace {
const char* const kConstraintGaveUp =
    "the output's constraint (response_format, text.format, strict tools or tool_choice) needed more work for one "
    "token than the per-token limit allows: its schema or grammar can match in too many ways at once; simplify it";
}  // namespace

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_ordered_json(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), "application/json");
}

void Server::Job::collect(const std::function<void(const Pick&)>& on_token) {
  for (bool finished = false; !finished;) {
    for (const Pick& p : take(1.0, finished)) on_token(p);
    if (ConnectionServer::client_gone()) cancelled = true;  // its sequence ends at the next step
  }
  if (!error.empty()) throw ApiError(status, error);
}

void Server::Job::stream(std::shared_ptr<Job> job, httplib::Response& res, bool http10, JobEvents events) {
  auto first = std::make_shared<bool>(true);
  httplib::ContentProviderWithoutLength provider = [=](size_t, httplib::DataSink& sink) {
    auto write = [&](const std::string& text) {
      if (sink.write(text.data(), text.size())) return true;
      job->cancelled = true;  // the client went away: its sequence ends at the next step
      return false;
    };
    if (*first) {
      *first = false;
      return write(events.opening());
    }
    bool finished = false;
    std::deque<Pick> picks = job->take(10.0, finished);
    if (picks.empty() && !finished) return write(": keep-alive\n\n");
    std::string out;
    for (const Pick& p : picks) out += events.token(p);
    if (finished) out += events.closing();
    if (!out.empty() && !write(out)) return false;
    if (finished) sink.done();
    return true;
  };
  auto release = [job](bool) { job->cancelled = true; };
  if (http10)
    res.set_content_provider("text/event-stream", std::move(provider), std::move(release));
  else
    res.set_chunked_content_provider("text/event-stream", std::move(provider), std::move(release));
}

Server::Server(const ServeOptions& o)
    : opt_(o),
      responses_(static_cast<size_t>(std::max(1, o.responses_max)), static_cast<size_t>(std::max(1, o.responses_mib))
                                                                        << 20),
      instance_(cat(std::hex, std::random_device{}() & 0xffffff)) {
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
  ConnectionLimits limits;
  limits.max_connections = o.max_connections, limits.max_body_bytes = o.max_body_bytes;
  http_ = std::make_unique<ConnectionServer>(limits);
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
  gen_ = &generator, tok_ = &tokenizer, limits_ = limits, status_ = std::move(status);
  tokenizer.prepare_encoding();
  ready_ = true;
}

void Server::route() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty() || !req.path.starts_with("/v1/")) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + opt_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, 401,
              ApiError(401, "a valid API key is needed (Authorization: Bearer KEY)", "", "authentication_error",
                       "invalid_api_key")
                  .body());
    metrics_.request(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // What httplib answers itself (no route, a body too large, ...) gets an
  // OpenAI-style body too.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message =
        res.status == 404 ? "no such route: " + req.method + " " + req.path : cat("HTTP status ", res.status);
    send_json(
        res, res.status,
        ApiError(res.status, message, "", res.status == 404 ? "not_found_error" : "invalid_request_error").body());
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_)
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
  // What ready() set is read only once ready_ says so.
  s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!ready_) {
      send_json(res, 503, ApiError(503, "Loading model", "", "unavailable_error").body());
      res.set_header("Retry-After", "1");
      return metrics_.request(req.path, 503);
    }
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", limits_.model_id},
                                      {"object", "model"},
                                      {"created", status_.value("started", 0)},
                                      {"owned_by", "tps"},
                                      {"max_model_len", limits_.context}}})}});
    metrics_.request(req.path, 200);
  });
  s.Get("/v1/status", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return send_json(res, 200, {{"ready", false}});
    json j = status_;
    j["ready"] = true;
    j["sequences"] = {{"running", metrics_.running()}, {"waiting", metrics_.waiting()}};
    j["tokens_per_second"] = metrics_.tokens_per_second();
    const Metrics::Kv kv = metrics_.kv();
    j["kv"] = {{"blocks_total", kv.total},
               {"blocks_used", kv.held},
               {"blocks_cached", kv.cached},
               {"block_positions", kKvBlock}};
    const PromptCacheStats c = metrics_.prompt_cache();
    j["cache_ram"] = {{"blocks_total", c.full_blocks},
                      {"blocks_used", c.full_used},
                      {"sliding_blocks_total", c.sliding_blocks},
                      {"bytes", c.bytes},
                      {"max_bytes", c.max_bytes},
                      {"saved_blocks", c.saved},
                      {"restored_blocks", c.restored},
                      {"evicted_blocks", c.evicted},
                      {"hits", c.hits},
                      {"misses", c.misses}};
    j["cache_disk"] = {{"on", c.disk},
                       {"files", c.disk_files},
                       {"bytes", c.disk_bytes},
                       {"loaded_blocks", c.disk_loaded},
                       {"written_blocks", c.disk_written},
                       {"write_failures", c.disk_write_failures}};
    const ResponseStoreStats r = responses_.stats();
    j["responses"] = {{"stored", r.count},        {"bytes", r.bytes}, {"max_stored", r.max_count},
                      {"max_bytes", r.max_bytes}, {"hits", r.hits},   {"misses", r.misses},
                      {"evictions", r.evictions}};
    send_json(res, 200, j);
  });
  auto generation = [this](const std::string& endpoint, bool chat) {
    return [this, endpoint, chat](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!ready_) throw ApiError(503, "Loading model", "", "unavailable_error");
        if (stopping_) throw ApiError(503, "the server is shutting down", "", "unavailable_error");
        this->generate(parse_request_body(req.body), chat, req, res);
      } catch (const ApiError& e) {
        if (e.status == 503) res.set_header("Retry-After", "1");
        send_json(res, e.status, e.body());
      } catch (const std::exception& e) {
        send_json(res, 500, ApiError(500, cat("internal error: ", e.what()), "", "server_error").body());
      }
      metrics_.request(endpoint, res.status);
    };
  };
  s.Post("/v1/chat/completions", generation("/v1/chat/completions", true));
  s.Post("/v1/completions", generation("/v1/completions", false));
  route_responses();
}

std::shared_ptr<Server::Job> Server::submit(std::vector<int32_t> prompt, const GenerationRequest& r,
                                            const char* param) {
  if (static_cast<int>(prompt.size()) >= limits_.context)
    throw ApiError(400,
                   cat("the prompt is ", prompt.size(), " tokens; the context holds ", limits_.context,
                       ", with room for at least one generated token"),
                   param, "invalid_request_error", "context_length_exceeded");
  if (queued_ >= opt_.max_queue)
    throw ApiError(503, cat("the queue is full (", opt_.max_queue, " requests wait); try again"), "",
                   "unavailable_error");
  std::unique_lock<std::mutex> lock(inbox_m_);
  if (closed_) throw ApiError(503, "the server is shutting down", "", "unavailable_error");
  auto job = std::make_shared<Job>();
  job->params.sampler = r.sampler;
  if (!r.seed_given) job->params.sampler.seed = std::random_device{}();
  const int room = limits_.context - static_cast<int>(prompt.size());
  job->params.max_new_tokens = r.max_new_tokens > 0 ? std::min(r.max_new_tokens, room) : room;
  job->params.top_logprobs = r.logprobs ? std::max(1, r.top_logprobs) : 0;
  job->params.constraint = r.output.spec;
  job->prompt = std::move(prompt);
  job->deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.request_seconds));
  ++queued_;
  inbox_.push_back(job);
  lock.unlock();
  inbox_cv_.notify_one();
  return job;
}

void Server::generate(const nlohmann::ordered_json& body, bool chat, const httplib::Request& req,
                      httplib::Response& res) {
  std::unique_ptr<GenerationRequest> request;
  std::vector<int32_t> prompt;
  if (chat) {
    auto r = std::make_unique<ChatRequest>(parse_chat_request(body, limits_));
    prompt = render_conversation(r->conversation, [this](const std::string& s) { return tok_->encode(s); });
    request = std::move(r);
  } else {
    auto r = std::make_unique<CompletionRequest>(parse_completion_request(body, limits_));
    prompt = tok_->encode(r->prompt, true);
    request = std::move(r);
  }
  const GenerationRequest& r = *request;
  check_output_constraint(r.output, gen_->constraints());  // compiled here, not on the engine loop
  const int prompt_tokens = static_cast<int>(prompt.size());
  std::shared_ptr<Job> job = submit(std::move(prompt), r);
  const uint64_t n = next_id_++;
  auto shape = std::make_shared<const ApiResponse>(cat(chat ? "chatcmpl-" : "cmpl-", std::hex, n), std::time(nullptr),
                                                   limits_.model_id, chat, r.logprobs, r.include_usage);
  auto rt = std::make_shared<ResponseText>(*tok_, chat, r.stop, r.logprobs ? r.top_logprobs : -1,
                                           cat("call_", std::hex, n, "_"));
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
  for (auto it = live_.begin(); it != live_.end();) {
    const std::shared_ptr<Job>& job = it->second;
    const bool ends = stopping_ || (!job->started && (job->cancelled || Clock::now() > job->deadline));
    if (ends && gen_->cancel(it->first)) {
      if (!job->started) --queued_;
      if (stopping_)
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
  if (stopping_ && live_.empty()) {
    std::lock_guard<std::mutex> lock(inbox_m_);
    if (inbox_.empty()) return false;
  }
  if (idle && live_.empty()) {
    std::unique_lock<std::mutex> lock(inbox_m_);
    inbox_cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return !inbox_.empty() || stopping_; });
  }
  return true;
}

}  // namespace tps
