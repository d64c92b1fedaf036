#include "serve/api/job.h"

#include <httplib.h>

#include "serve/http/api_error.h"
#include "serve/http/connection_server.h"
#include "serve/http/request_log.h"

namespace tps {

void Job::collect(const std::function<void(const Pick&)>& on_token) {
  for (bool finished = false; !finished;) {
    for (const Pick& p : take(1.0, finished)) on_token(p);
    if (ConnectionServer::client_gone()) cancelled = true;  // its sequence ends at the next step
  }
  if (!error.empty()) throw ApiError(status, error);
}

std::string Job::describe(Clock::time_point since) {
  std::lock_guard<std::mutex> lock(m);
  const std::string end = !error.empty() ? cat("failed ", status) : done ? finish : "client left";
  return cat(
      " (", end, "): prompt ", prompt.size(), " tokens (", reused, " cached), ", generated, " generated",
      drafted_taken > 0 ? cat(" (", drafted_taken, " drafted)") : std::string(),
      generated > 0 ? ", first token " + seconds_text(std::chrono::duration<double>(first_token - since).count()) : "");
}

void Job::stream(std::shared_ptr<Job> job, httplib::Response& res, bool http10, JobEvents events) {
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
    if (picks.empty() && !finished) return write(events.idle ? events.idle() : ": keep-alive\n\n");
    std::string out;
    for (const Pick& p : picks) out += events.token(p);
    if (finished) out += events.closing();
    if (!out.empty() && !write(out)) return false;
    if (finished) sink.done();
    return true;
  };
  // The request's log line once the stream is over (serve/http/request_log.h).
  const std::shared_ptr<RequestRecord> record = RequestRecord::current();
  if (record) record->defer();
  auto release = [job, record](bool) {
    job->cancelled = true;
    if (record) record->finish(200);
  };
  if (http10)
    res.set_content_provider("text/event-stream", std::move(provider), std::move(release));
  else
    res.set_chunked_content_provider("text/event-stream", std::move(provider), std::move(release));
}

}  // namespace tps
