#include "serve/api/random_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "runtime/error.h"

namespace tps {

std::string random_id() {
  uint8_t bytes[16];
  for (size_t got = 0; got < sizeof bytes;) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno != EINTR) throw Error(cat("getrandom: ", std::strerror(errno)));
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (uint8_t b : bytes) id += kHex[b >> 4], id += kHex[b & 15];
  return id;
}

}  // namespace tps
