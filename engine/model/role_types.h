// "ROLE=TYPE,ROLE=TYPE,...": how --quantize (model/quantize_plan.h) and
// tps-mkmodel --type (model/synthetic_model.h) name the types of roles of
// weights. Split here once; each caller checks its own roles and types.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tps {

struct RoleType {
  std::string item;  // "role=type", as given
  std::string role, type;
};

// The items of text in order, each split at its first '='. An item without
// one throws InputError with refusal(item).
std::vector<RoleType> split_role_types(const std::string& text,
                                       const std::function<std::string(const std::string& item)>& refusal);

}  // namespace tps
