// The harmony chat format of gpt-oss (spec §6): rendering a conversation
// into tokens, and following the model's output to show only the channels
// the user asked for.
#pragma once

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

struct ChatOptions {
  std::string developer;             // instructions (a developer message), optional
  std::string reasoning = "medium";  // low | medium | high
  std::string current_date;          // "YYYY-MM-DD", optional
};

// Tokens of: the default system message, an optional developer message, the
// user message, and "<|start|>assistant" -- each text piece encoded on its own
// with special tokens NOT parsed (a prompt cannot inject control tokens).
std::vector<int32_t> render_chat_prompt(const std::string& user, const ChatOptions& options,
                                        const std::function<std::vector<int32_t>(const std::string&)>& encode_text);

// Tokens that end the assistant's turn during generation: <|return|> and
// <|call|> (harmony), and <|endoftext|> (EOS-like, as llama.cpp treats it).
bool is_stop_token(int32_t id);

// Follows generated tokens through harmony's structure and says which ones
// are message content and of which channel.
class HarmonyStream {
 public:
  enum class Part { header, content, control };
  struct Step {
    Part part;
    std::string channel;  // for content: the message's channel ("final", "analysis", ...)
  };
  // decode_piece gives a token's text (used for channel names in headers).
  Step push(int32_t id, const std::string& piece);

 private:
  enum class State { header, channel_name, content } state_ = State::header;
  std::string channel_;
};

}  // namespace tps
