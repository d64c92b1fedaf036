#include "engine/text/harmony.h"

#include <algorithm>
#include <sstream>

namespace tps {

namespace {

// The harmony renderer's system content (spec §6.3; openai/harmony's
// defaults): sections joined by blank lines.
std::string system_content(const Conversation& c) {
  std::string s = "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06";
  if (!c.current_date.empty()) s += "\nCurrent date: " + c.current_date;
  s += "\n\nReasoning: " + c.reasoning +
       "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (!c.functions.empty() || !c.namespaces.empty())
    s += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  return s;
}

// "## NAME\n\n[// description\n]namespace NAME {\n\nBODY} // namespace NAME"
std::string namespace_text(const std::string& name, const std::string& description, const std::string& body) {
  std::string s = "## " + name + "\n\n";
  for (size_t at = 0; at < description.size();) {
    const size_t end = std::min(description.find('\n', at), description.size());
    s += "// " + description.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return s + "namespace " + name + " {\n\n" + body + "} // namespace " + name;
}

std::string developer_content(const Conversation& c) {
  std::string s;
  if (!c.instructions.empty()) s = "# Instructions\n\n" + c.instructions;
  if (!c.functions.empty() || !c.namespaces.empty()) {
    if (!s.empty()) s += "\n\n";
    s += "# Tools";
    if (!c.functions.empty()) s += "\n\n" + namespace_text("functions", "", c.functions);
    for (const ToolNamespace& n : c.namespaces) s += "\n\n" + namespace_text(n.name, n.description, n.body);
  }
  return s;
}

}  // namespace

std::vector<int32_t> render_conversation(const Conversation& c, const EncodeText& encode_text) {
  using namespace harmony;
  std::vector<int32_t> out;
  auto text = [&](const std::string& s) {
    if (s.empty()) return;
    std::vector<int32_t> ids = encode_text(s);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  // <|start|>ROLE[ to=R][<|channel|>C][ CT]<|message|>BODY END
  auto message = [&](const HarmonyMessage& m, bool call) {
    out.push_back(kStart);
    text(m.role + (m.recipient.empty() ? "" : " to=" + m.recipient));
    if (!m.channel.empty()) {
      out.push_back(kChannel);
      text(m.channel);
    }
    if (m.content_type.starts_with("<|constrain|>")) {
      text(" ");
      out.push_back(kConstrain);
      text(m.content_type.substr(13));
    } else if (!m.content_type.empty()) {
      text(" " + m.content_type);
    }
    out.push_back(kMessage);
    text(m.content);
    out.push_back(call ? kCall : kEnd);
  };
  message({"system", "", "", "", system_content(c)}, false);
  const std::string developer = developer_content(c);
  if (!developer.empty()) message({"developer", "", "", "", developer}, false);
  for (const HarmonyMessage& m : c.messages) message(m, m.role == "assistant" && !m.recipient.empty());
  out.push_back(kStart);
  text("assistant");
  return out;
}

std::vector<int32_t> render_chat_prompt(const std::string& user, const ChatOptions& o, const EncodeText& encode_text) {
  Conversation c;
  c.reasoning = o.reasoning, c.current_date = o.current_date, c.instructions = o.developer;
  c.messages.push_back({"user", "", "", "", user});
  return render_conversation(c, encode_text);
}

std::string tool_recipient(const std::string& qualified_name) {
  return qualified_name.find('.') == std::string::npos ? "functions." + qualified_name : qualified_name;
}

bool is_stop_token(int32_t id) { return std::find(kStopTokens.begin(), kStopTokens.end(), id) != kStopTokens.end(); }

namespace {

// A header's text, "ROLE[ to=R]<|channel|>CHANNEL[ to=R][ CONTENT TYPE]", as
// openai/harmony reads it: the recipient may sit in the role part or after
// the channel; what is left after the channel is the content type.
HarmonyStream::Header parse_header(const std::string& text) {
  HarmonyStream::Header h;
  const size_t at = text.find("<|channel|>");
  auto words = [](const std::string& s) {
    std::vector<std::string> w;
    std::istringstream in(s);
    for (std::string x; in >> x;) w.push_back(x);
    return w;
  };
  for (const std::string& w : words(text.substr(0, at))) {
    if (w.starts_with("to="))
      h.recipient = w.substr(3);
    else if (h.role.empty())
      h.role = w;
  }
  if (at == std::string::npos) return h;
  // "<|constrain|>" may follow the channel or recipient without a space.
  const std::string after = text.substr(at + 11);
  std::string rest;
  for (size_t i = 0; i < after.size();) {
    if (after.compare(i, 13, "<|constrain|>") == 0) {
      rest += " <|constrain|>";
      i += 13;
    } else {
      rest += after[i++];
    }
  }
  std::string type;
  for (const std::string& w : words(rest)) {
    if (w.starts_with("to="))
      h.recipient = w.substr(3);
    else if (h.channel.empty())
      h.channel = w;
    else
      type += (type.empty() ? "" : " ") + w;
  }
  h.content_type = type;
  return h;
}

}  // namespace

HarmonyStream::Step HarmonyStream::push(int32_t id, const std::string& piece) {
  using namespace harmony;
  if (state_ == State::raw) return {Part::raw, nullptr, piece};
  switch (id) {
    case kStart:
    case kEnd:
    case kReturn:
    case kCall:
      state_ = State::header;
      header_text_.clear();
      prompt_header_ = false;
      return {Part::control, nullptr, {}};
    case kMessage:
      header_ = parse_header(header_text_);
      state_ = State::content;
      prompt_header_ = false;
      return {Part::control, nullptr, {}};
    default: break;
  }
  if (state_ == State::content) return {Part::content, &header_, {}};
  header_text_ += piece;  // <|channel|> and <|constrain|> come as their text
  if (header_text_.size() <= kMaxHeaderBytes) return {Part::header, nullptr, {}};
  state_ = State::raw;
  return {Part::raw, nullptr, header_text_.substr(prompt_header_ ? 9 : 0)};  // not the prompt's "assistant"
}

}  // namespace tps
