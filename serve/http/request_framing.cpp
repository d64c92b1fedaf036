#include "serve/http/request_framing.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "runtime/error.h"

namespace tps {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value lists `token` (Connection: close).
bool lists(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
  }
  return false;
}

}  // namespace

RequestFramer::State RequestFramer::refuse(int status, std::string reason) {
  status_ = status, reason_ = std::move(reason);
  return state_ = State::refused;
}

RequestFramer::State RequestFramer::feed(std::string_view bytes) {
  if (state_ != State::incomplete) return state_;
  if (head_end_ == 0 && (read_head(bytes) != State::incomplete || head_end_ == 0)) return state_;
  if (chunked_) return read_chunks(bytes);
  if (bytes.size() - head_end_ < length_) return state_;
  return finish(head_, bytes.substr(head_end_, length_), head_end_ + length_);
}

RequestFramer::State RequestFramer::read_head(std::string_view bytes) {
  // Empty lines before the request line are skipped (RFC 9112, 2.2).
  while (start_ < bytes.size() && (bytes[start_] == '\n' || bytes.substr(start_, 2) == "\r\n"))
    start_ += bytes[start_] == '\n' ? 1 : 2;
  const size_t end = bytes.find("\r\n\r\n", std::max(start_, scanned_ < 3 ? 0 : scanned_ - 3));
  // A line ended by a bare LF is refused at once: waiting for a CRLF that
  // such a client never sends would hold it until the read timeout.
  const size_t head_bytes = end == std::string_view::npos ? bytes.size() : end + 4;
  for (size_t i = std::max(start_, scanned_); i < head_bytes; ++i)
    if (bytes[i] == '\n' && (i == 0 || bytes[i - 1] != '\r'))
      return refuse(400, "a line of the request's head ends in a bare LF, not CRLF");
  scanned_ = bytes.size();
  if (end == std::string_view::npos ? bytes.size() > kMaxHeadBytes : end + 4 > kMaxHeadBytes)
    return refuse(431, cat("the request's head (request line and headers) is over ", kMaxHeadBytes, " bytes"));
  if (end == std::string_view::npos) return state_;
  head_end_ = end + 4;
  std::string_view lines = bytes.substr(start_, end + 2 - start_);  // each line with its CRLF
  const std::string_view request_line = lines.substr(0, lines.find("\r\n"));
  lines.remove_prefix(request_line.size() + 2);
  const size_t space = request_line.rfind(' ');
  const std::string_view version = space == std::string_view::npos ? "" : request_line.substr(space + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return refuse(400, "not an HTTP/1.1 or HTTP/1.0 request line");
  keep_alive_ = version == "HTTP/1.1";
  head_.assign(request_line).append("\r\n");
  bool has_length = false;
  while (!lines.empty()) {
    const std::string_view line = lines.substr(0, lines.find("\r\n"));
    lines.remove_prefix(line.size() + 2);
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t'))
      return refuse(400, "a header line folded onto the next (obsolete line folding)");
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && colon > 0 && (line[colon - 1] == ' ' || line[colon - 1] == '\t'))
      return refuse(400, "white space between a header's name and its colon");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = colon == std::string_view::npos ? "" : trim(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      uint64_t n = 0;
      const auto [end_of_number, error] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || error != std::errc() || end_of_number != value.data() + value.size())
        return refuse(error == std::errc::result_out_of_range ? 413 : 400,
                      cat("Content-Length '", value, "' is not a byte count"));
      if (has_length && n != length_) return refuse(400, "two Content-Lengths that disagree");
      has_length = true, length_ = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      if (!iequals(value, "chunked"))
        return refuse(400, cat("Transfer-Encoding '", value, "' is not supported (only chunked)"));
      chunked_ = true;
    } else if (iequals(name, "Expect")) {
      if (!iequals(value, "100-continue")) return refuse(417, cat("Expect '", value, "' is not supported"));
      expect_continue_ = true;
    } else {
      if (iequals(name, "Content-Encoding") && !value.empty() && !iequals(value, "identity"))
        return refuse(415, cat("a request body must not be compressed (Content-Encoding: ", value, ")"));
      if (iequals(name, "Connection") && lists(value, "close")) keep_alive_ = false;
      head_.append(line).append("\r\n");
    }
  }
  if (chunked_ && has_length) return refuse(400, "both Transfer-Encoding: chunked and a Content-Length");
  if (length_ > max_body_)
    return refuse(413, cat("the request body is ", length_, " bytes; at most ", max_body_, " are taken"));
  if (has_length) head_ += cat("Content-Length: ", length_, "\r\n");
  next_ = head_end_;
  return state_;
}

RequestFramer::State RequestFramer::read_chunks(std::string_view bytes) {
  // Chunk framing is not free either: 1-byte chunks with long extensions.
  if (bytes.size() - head_end_ > 2 * max_body_ + kMaxHeadBytes)
    return refuse(413, cat("the request's chunks take more than ", 2 * max_body_ + kMaxHeadBytes, " bytes"));
  while (true) {
    const size_t eol = bytes.find("\r\n", next_);
    const size_t line = (eol == std::string_view::npos ? bytes.size() : eol) - next_;
    if (line > (trailers_ ? kMaxHeadBytes : kMaxChunkLine))
      return refuse(400, cat("a chunk-size or trailer line is over ", kMaxChunkLine, " bytes"));
    if (eol == std::string_view::npos) return state_;
    if (trailers_) {  // after the last chunk: trailer lines, dropped, up to an empty line
      if (line == 0) return finish(head_ + cat("Content-Length: ", body_.size(), "\r\n"), body_, eol + 2);
      next_ = eol + 2;
      continue;
    }
    const std::string_view size_line = bytes.substr(next_, line);
    uint64_t size = 0;
    const auto [end, error] = std::from_chars(size_line.data(), size_line.data() + size_line.size(), size, 16);
    const std::string_view rest = trim(size_line.substr(end - size_line.data()));
    if (end == size_line.data() || (!rest.empty() && rest[0] != ';'))
      return refuse(400, cat("'", size_line.substr(0, 40), "' is not a chunk size"));
    if (error == std::errc::result_out_of_range || size > max_body_ - body_.size())
      return refuse(413, cat("the chunked request body is over ", max_body_, " bytes"));
    if (size == 0) {
      trailers_ = true, next_ = eol + 2;
      continue;
    }
    const size_t data = eol + 2;
    if (bytes.size() < data + size + 2) return state_;
    if (bytes.substr(data + size, 2) != "\r\n") return refuse(400, "a chunk is longer than its size says");
    body_.append(bytes.substr(data, size));
    next_ = data + size + 2;
  }
}

RequestFramer::State RequestFramer::finish(std::string_view head, std::string_view body, size_t consumed) {
  request_.reserve(head.size() + 2 + body.size());
  request_.assign(head).append("\r\n").append(body);
  consumed_ = consumed;
  return state_ = State::complete;
}

}  // namespace tps
