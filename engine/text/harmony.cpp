#include "engine/text/harmony.h"

namespace tps {

std::vector<int32_t> render_chat_prompt(const std::string& user, const ChatOptions& o,
                                        const std::function<std::vector<int32_t>(const std::string&)>& encode_text) {
  using namespace harmony;
  std::vector<int32_t> out;
  auto text = [&](const std::string& s) {
    std::vector<int32_t> ids = encode_text(s);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  auto message = [&](const std::string& role, const std::string& content) {
    out.push_back(kStart);
    text(role);
    out.push_back(kMessage);
    text(content);
    out.push_back(kEnd);
  };
  // The harmony renderer's default system content (spec §6.3).
  std::string system = "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06";
  if (!o.current_date.empty()) system += "\nCurrent date: " + o.current_date;
  system += "\n\nReasoning: " + o.reasoning +
            "\n\n# Valid channels: analysis, commentary, final. Channel must be included for "
            "every message.";
  message("system", system);
  if (!o.developer.empty()) message("developer", "# Instructions\n\n" + o.developer);
  message("user", user);
  out.push_back(kStart);
  text("assistant");
  return out;
}

bool is_stop_token(int32_t id) { return id == harmony::kReturn || id == harmony::kCall || id == harmony::kEndOfText; }

HarmonyStream::Step HarmonyStream::push(int32_t id, const std::string& piece) {
  using namespace harmony;
  switch (id) {
    case kStart:
      state_ = State::header;
      channel_.clear();
      return {Part::control, {}};
    case kChannel:
      state_ = State::channel_name;
      channel_.clear();
      return {Part::control, {}};
    case kMessage: state_ = State::content; return {Part::control, {}};
    case kEnd:
    case kReturn:
    case kCall: state_ = State::header; return {Part::control, {}};
    default: break;
  }
  if (state_ == State::channel_name) {
    channel_ += piece;
    return {Part::header, {}};
  }
  if (state_ == State::content) return {Part::content, channel_};
  return {Part::header, {}};
}

}  // namespace tps
