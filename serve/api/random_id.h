// Ids of what the server makes (responses, messages, completions, tool
// calls): 128 bits from the kernel's random source as 32 hex digits, so
// that no id can be guessed from another -- a stored response is read by
// its id.
#pragma once

#include <string>

namespace tps {

std::string random_id();

}  // namespace tps
