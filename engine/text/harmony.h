// The harmony chat format of gpt-oss (spec §6): rendering a conversation
// into tokens, and following the model's output message by message -- its
// channel (analysis, commentary, final), its recipient (a tool call goes
// "to=functions.NAME") and its content.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tps {

// Special token ids of o200k_harmony (spec §5.1).
namespace harmony {
constexpr int32_t kStartOfText = 199998;
constexpr int32_t kEndOfText = 199999;
constexpr int32_t kReturn = 200002;
constexpr int32_t kConstrain = 200003;
constexpr int32_t kChannel = 200005;
constexpr int32_t kStart = 200006;
constexpr int32_t kEnd = 200007;
constexpr int32_t kMessage = 200008;
constexpr int32_t kCall = 200012;
}  // namespace harmony

// One message of a conversation after the system and developer messages.
struct HarmonyMessage {
  std::string role;          // user, assistant, or a tool's name (functions.NAME)
  std::string channel;       // assistant and tool messages: analysis, commentary, final
  std::string recipient;     // a tool call's "functions.NAME"; a tool result's "assistant"
  std::string content_type;  // a tool call's "<|constrain|>json"
  std::string content;
};

// A namespace of tools besides `functions` (an agent's group of tools, an
// MCP server's): called as "NAME.TOOL", rendered after `functions` in the
// developer message as harmony renders a tool namespace.
struct ToolNamespace {
  std::string name;
  std::string description;  // optional
  std::string body;         // its tool types, as the functions namespace's
};

struct Conversation {
  std::string reasoning = "medium";  // low | medium | high
  std::string current_date;          // "YYYY-MM-DD", optional
  std::string instructions;          // the developer message's instructions, optional
  std::string functions;             // the functions namespace's body (tool types), optional
  std::vector<ToolNamespace> namespaces;
  std::vector<HarmonyMessage> messages;
};

// A tool's name as the APIs give it, qualified by its namespace when that
// is not `functions` ("f", "multi_agent_v1.spawn"), and the recipient of
// its calls ("functions.f", "multi_agent_v1.spawn"). Tool and namespace
// names hold no '.': the first one, if any, separates them.
std::string tool_recipient(const std::string& qualified_name);

using EncodeText = std::function<std::vector<int32_t>(const std::string&)>;

// Tokens of the conversation as harmony renders it for the model to answer:
// the system message (identity, knowledge cutoff, date, reasoning, channels,
// and with functions the line that sends their calls to commentary), the
// developer message (instructions, the functions namespace) when either is
// given, each message, and "<|start|>assistant". Text is encoded with
// special tokens NOT parsed (a prompt cannot inject control tokens); the
// frame's tokens are the special ids. A message with a recipient ends with
// <|call|> when it is the assistant's, others with <|end|>.
std::vector<int32_t> render_conversation(const Conversation& conversation, const EncodeText& encode_text);

// The single-turn case: the default system message, an optional developer
// message (its instructions), the user message, "<|start|>assistant".
struct ChatOptions {
  std::string developer;
  std::string reasoning = "medium";
  std::string current_date;
};
std::vector<int32_t> render_chat_prompt(const std::string& user, const ChatOptions& options,
                                        const EncodeText& encode_text);

// Tokens that end the assistant's turn during generation: <|return|> and
// <|call|> (harmony), and <|endoftext|> (EOS-like, as llama.cpp treats it).
// The generator ends a sequence at them (engine/sched/sequence_end.h); text
// readers only leave them out of what they show.
inline constexpr std::array<int32_t, 3> kStopTokens = {harmony::kReturn, harmony::kCall, harmony::kEndOfText};
bool is_stop_token(int32_t id);

// Follows generated tokens through harmony's structure: each message's
// header (role, recipient, channel, content type: the text between
// <|start|> and <|message|>, parsed as the harmony library does) and which
// tokens are its content. The model's first message continues the prompt's
// "<|start|>assistant", so the reader starts inside an assistant header.
// Output that does not follow harmony -- a header that goes on past
// kMaxHeaderBytes without opening a message -- is raw text from there on,
// so a model that ignores the format still shows what it says.
class HarmonyStream {
 public:
  static constexpr size_t kMaxHeaderBytes = 128;
  enum class Part { header, content, control, raw };
  struct Header {
    std::string role, recipient, channel, content_type;
  };
  struct Step {
    Part part;
    const Header* message = nullptr;  // for content: the message's header
    std::string raw;                  // for raw: the text to show (at the switch, all the model said so far)
  };
  // piece: the token's text (the header is read from it).
  Step push(int32_t id, const std::string& piece);

 private:
  enum class State { header, content, raw } state_ = State::header;
  std::string header_text_ = "assistant";
  bool prompt_header_ = true;  // header_text_ starts with the prompt's "assistant"
  Header header_;
};

}  // namespace tps
