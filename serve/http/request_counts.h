// HTTP requests answered, counted by route and status for GET /metrics.
// The route is a label from a fixed set -- the server's routes -- and never
// the path a client sent: a label taken from the path could forge a line of
// the exposition (a quote and a newline), and every new path would add a
// series forever. A path that is no route counts as "other". A new API adds
// its routes to the set (request_counts.cpp). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace tps {

class RequestCounts {
 public:
  void add(std::string_view path, int status);
  // The samples of tps_requests_total, one line each:
  // tps_requests_total{endpoint="...",status="..."} N
  std::string samples() const;

 private:
  mutable std::mutex m_;
  std::map<std::pair<std::string_view, int>, int64_t> counts_;  // views of the route labels' literals
};

}  // namespace tps
