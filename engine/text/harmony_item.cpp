#include "engine/text/harmony_item.h"

namespace tps {

HarmonyItem classify(const HarmonyStream::Header& h) {
  if (!h.recipient.empty() && h.recipient != "assistant")
    return {HarmonyItem::Kind::call, h.recipient.starts_with("functions.") ? h.recipient.substr(10) : h.recipient};
  if (h.channel == "analysis") return {HarmonyItem::Kind::reasoning, ""};
  return {h.channel == "final" ? HarmonyItem::Kind::final : HarmonyItem::Kind::text, ""};
}

}  // namespace tps
