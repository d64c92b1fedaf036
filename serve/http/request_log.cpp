#include "serve/http/request_log.h"

#include <cstdio>

#include "runtime/log.h"

namespace tps {

namespace {

thread_local std::shared_ptr<RequestRecord> current_record;

// A client's header, as a log line may hold it: printable ASCII, cut short.
std::string printable(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, RequestRecord::kMaxAgent)) out += c >= 0x20 && c < 0x7f && c != '"' ? c : '?';
  return out;
}

}  // namespace

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

RequestRecord::RequestRecord(std::string route, const std::string& user_agent)
    : route_(std::move(route)), agent_(printable(user_agent)), start_(Clock::now()) {}

void RequestRecord::finish(int status) {
  if (written_) return;
  written_ = true;
  const std::string work = work_ ? work_() : "";
  log_info(route_, " ", status, work.empty() ? ": " : work + ", ", seconds_text(seconds_since(start_)), "; \"", agent_,
           "\"");
}

std::shared_ptr<RequestRecord> RequestRecord::current() { return current_record; }

RequestRecord::Scope::Scope(std::shared_ptr<RequestRecord> record) { current_record = std::move(record); }

RequestRecord::Scope::~Scope() { current_record.reset(); }

}  // namespace tps
