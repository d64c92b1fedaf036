#include "engine/model/role_types.h"

#include <algorithm>

#include "runtime/error.h"

namespace tps {

std::vector<RoleType> split_role_types(const std::string& text,
                                       const std::function<std::string(const std::string& item)>& refusal) {
  std::vector<RoleType> out;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw InputError(refusal(item));
    out.push_back({item, item.substr(0, eq), item.substr(eq + 1)});
    at = end + 1;
  }
  return out;
}

}  // namespace tps
