#include "serve/http/request_counts.h"

#include "runtime/error.h"

namespace tps {

namespace {

const char* route_label(std::string_view path) {
  static constexpr std::string_view kRoutes[] = {"/v1/chat/completions",
                                                 "/v1/completions",
                                                 "/v1/responses",
                                                 "/v1/responses/{id}",
                                                 "/v1/responses/{id}/input_items",
                                                 "/v1/models",
                                                 "/v1/status",
                                                 "/health",
                                                 "/metrics",
                                                 "/"};
  for (std::string_view route : kRoutes)
    if (path == route) return route.data();
  return "other";
}

}  // namespace

void RequestCounts::add(std::string_view path, int status) {
  std::lock_guard<std::mutex> lock(m_);
  ++counts_[{route_label(path), status}];
}

std::string RequestCounts::samples() const {
  std::string out;
  std::lock_guard<std::mutex> lock(m_);
  for (const auto& [key, n] : counts_)
    out += cat("tps_requests_total{endpoint=\"", key.first, "\",status=\"", key.second, "\"} ", n, "\n");
  return out;
}

}  // namespace tps
