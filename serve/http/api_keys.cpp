#include "serve/http/api_keys.h"

#include <httplib.h>

#include <sstream>

#include "runtime/error.h"
#include "runtime/mapped_file.h"

namespace tps {

namespace {

bool same(const std::string& a, const std::string& b) {
  unsigned char differ = a.size() != b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

std::string presented_key(const httplib::Request& req) {
  const std::string auth = trimmed(req.get_header_value("Authorization"));
  const size_t space = auth.find(' ');
  if (space != std::string::npos) {
    std::string scheme = auth.substr(0, space);
    for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "bearer") return trimmed(auth.substr(space + 1));
  }
  return trimmed(req.get_header_value("x-api-key"));
}

bool ApiKeys::admits(const httplib::Request& req) const {
  const std::string key = presented_key(req);
  bool found = false;
  for (const std::string& k : keys_) found |= !key.empty() && same(key, k);  // every key compared
  return found;
}

std::string ApiKeys::owner(const httplib::Request& req) const { return required() ? presented_key(req) : ""; }

std::vector<std::string> read_api_keys(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path, size_t{16} << 20);
  } catch (const InputError& e) {
    throw InputError(cat("--api-keys-file ", e.what()));
  }
  std::istringstream in(text);
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    line = trimmed(line);
    if (!line.empty() && line[0] != '#') keys.push_back(line);
  }
  if (keys.empty()) throw InputError(cat("--api-keys-file ", path, ": holds no key (one a line)"));
  return keys;
}

}  // namespace tps
