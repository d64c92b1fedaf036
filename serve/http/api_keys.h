// Who a request is, by the API key it presents: OpenAI's clients send
// "Authorization: Bearer KEY" (the scheme in any case, RFC 9110), Anthropic's
// "x-api-key: KEY". The server takes any of its keys (--api-key, repeatable,
// and --api-keys-file); what a key stores (Responses API responses) only
// that key reads, so users sharing a server do not see each other's.
#pragma once

#include <string>
#include <vector>

namespace httplib {
struct Request;
}  // namespace httplib

namespace tps {

class ApiKeys {
 public:
  explicit ApiKeys(std::vector<std::string> keys = {}) : keys_(std::move(keys)) {}
  bool required() const { return !keys_.empty(); }
  // Whether the request presents one of the keys (each compared in time
  // that does not depend on where it differs).
  bool admits(const httplib::Request& req) const;
  // Whose the request's stored things are: the key it presents when keys
  // are required, "" (everyone's) when not.
  std::string owner(const httplib::Request& req) const;

 private:
  std::vector<std::string> keys_;
};

// The key a request presents ("" for none).
std::string presented_key(const httplib::Request& req);

// Keys from a file, one a line (blank lines and lines starting with # left
// out). InputError naming the file when it cannot be read or holds none.
std::vector<std::string> read_api_keys(const std::string& path);

}  // namespace tps
