#include "launch/replay_command.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/sched/generator.h"
#include "engine/text/tokenizer.h"
#include "launch/cli.h"
#include "launch/json_output.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mapped_file.h"
#include "serve/chat/chat_request.h"
#include "serve/http/api_error.h"

namespace tps {

namespace {

// An assistant turn: the conversation before it, and what the model wrote.
struct Turn {
  std::vector<int32_t> prompt, forced;
};

// The assistant turns of a transcript (a Chat Completions body): each run of
// consecutive assistant messages (its reasoning, text and tool calls, as
// the chat API renders them) is one turn, forced from where the rendering
// of the conversation with it parts from the rendering without it -- just
// after "<|start|>", or after "<|start|>assistant" when the turn's first
// header tokenizes that word alone -- to its last message's end.
std::vector<Turn> read_turns(const std::string& path, const std::string& text, const Tokenizer& tok) {
  ChatRequest request;
  try {
    nlohmann::ordered_json body = parse_request_body(text);
    if (body.is_object()) body.erase("model");  // whichever model it was written with
    request = parse_chat_request(body, ApiLimits{"replay", 1 << 30, 1});
  } catch (const ApiError& e) {
    throw InputError(cat(path, ": not a Chat Completions request body: ", e.what()));
  }
  const EncodeText encode = [&tok](const std::string& s) { return tok.encode(s); };
  Conversation c = request.conversation;
  std::vector<HarmonyMessage> messages = std::move(c.messages);
  std::vector<Turn> turns;
  for (size_t end = 0, start = 0; start < messages.size(); start = end) {
    for (end = start; end < messages.size() && messages[end].role == "assistant";) ++end;
    if (end == start) {  // not the assistant's: the next message
      ++end;
      continue;
    }
    c.messages.assign(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(start));
    const std::vector<int32_t> before = render_conversation(c, encode);
    c.messages.assign(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(end));
    const std::vector<int32_t> with = render_conversation(c, encode);
    // Both end with the same "<|start|>assistant" (`header` tokens): the
    // turn is what `with` has between the common prefix and that.
    const size_t header =
        static_cast<size_t>(std::find(before.rbegin(), before.rend(), harmony::kStart) - before.rbegin()) + 1;
    size_t common = 0;
    while (common < before.size() && common < with.size() && before[common] == with[common]) ++common;
    if (common + header <= before.size())
      throw InputError(cat(path, ": assistant turn ", turns.size() + 1,
                           " changes how the conversation before it renders; it cannot be replayed"));
    const size_t turn_end = with.size() - header;
    if (turn_end <= common) throw InputError(cat(path, ": assistant turn ", turns.size() + 1, " is empty"));
    turns.push_back(Turn{std::vector<int32_t>(with.begin(), with.begin() + static_cast<std::ptrdiff_t>(common)),
                         std::vector<int32_t>(with.begin() + static_cast<std::ptrdiff_t>(common),
                                              with.begin() + static_cast<std::ptrdiff_t>(turn_end))});
  }
  if (turns.empty()) throw InputError(cat(path, ": no assistant turn to replay"));
  return turns;
}

}  // namespace

RunMode add_replay_command(CLI::App& app, ReplayOptions& replay) {
  CLI::App* command = app.add_subcommand(
      "replay",
      "decode a transcript's assistant turns as generation would, the transcript's tokens being the model's "
      "choices: what --speculate gives on that text (uses -m, -t, --split, --kv-type, --ctx, --speculate, --json)");
  command->add_option("--transcript", replay.transcript, "a Chat Completions request body (messages, tools)")
      ->type_name("FILE.json")
      ->required();
  command->fallthrough();
  return {command, {run_group::model, run_group::speculation, run_group::output}};
}

int run_replay(const RunOptions& options, const ReplayOptions& replay, const MpiSession& mpi, const RankSetup& setup) {
  RunOptions o = options;
  o.parallel = 1;
  GgufFile file = open_model(o, mpi);
  const std::vector<Turn> turns =
      read_turns(replay.transcript, read_text_file(replay.transcript), Tokenizer::from_gguf(file));
  size_t longest = 0;
  for (const Turn& t : turns) longest = std::max(longest, t.prompt.size() + t.forced.size());
  if (!o.context_given) o.context = static_cast<int>(blocks_for(static_cast<int>(longest)) * kKvBlock);
  if (static_cast<int64_t>(longest) > o.context)
    throw InputError(cat(replay.transcript, ": a turn needs ", longest, " positions, more than --ctx ", o.context));
  resolve_cache_ram(o, mpi, setup, file);
  RankRun r(o, mpi, setup, Clock::now(), std::move(file));
  Generator gen(r.model, r.pool, r.exchange, generator_options(o));
  const bool root = mpi.rank() == 0;
  size_t next = 0;
  int64_t forced = 0, decode_steps = 0, steps_at_first = 0;
  double decode_seconds = 0;
  Clock::time_point first{};
  // A turn's decode: from its first token (its prompt's last step) to its last.
  Generator::Events ev;
  ev.token = [&](int, const Pick&, SequenceEnd end) {
    if (first == Clock::time_point{}) first = Clock::now(), steps_at_first = gen.stats().decode_steps;
    if (end == SequenceEnd::none) return true;
    decode_seconds += seconds_since(first), first = Clock::time_point{};
    decode_steps += gen.stats().decode_steps - steps_at_first;
    return true;
  };
  ev.waiting = [](int, const std::string&) {};
  ev.between_steps = [&](bool idle) {
    if (!idle) return true;
    if (next == turns.size()) return false;
    SequenceParams p;
    p.sampler.temperature = 0;
    p.forced = turns[next].forced;
    p.max_new_tokens = static_cast<int>(p.forced.size());
    p.stop_tokens.clear();
    gen.add(turns[next].prompt, p);
    forced += static_cast<int64_t>(p.forced.size()) - 1;  // the first comes with the prompt's last step
    ++next;
    return true;
  };
  if (root)
    gen.run(ev);
  else
    gen.run({});
  if (!root) return 0;
  const Generator::Stats& s = gen.stats();
  const Scheduler::DraftStats& d = gen.scheduler().draft_stats();
  nlohmann::json cost = nlohmann::json::array();
  for (const auto& [tokens, c] : s.decode_cost)
    cost.push_back({{"step_tokens", tokens}, {"steps", c.steps}, {"seconds_per_step", c.seconds / c.steps}});
  const double rate = forced / std::max(decode_seconds, 1e-9);
  const nlohmann::json j = {
      {"model", o.model},
      {"transcript", replay.transcript},
      {"split", split_mode_name(r.shard().mode)},
      {"ranks", mpi.size()},
      {"threads", r.pool.size()},
      {"kv_type", kv_type_name(gen.kv().type())},
      {"speculate", o.speculate},
      {"turns", turns.size()},
      {"decode_tokens", forced},
      {"decode_seconds", decode_seconds},
      {"decode_tokens_per_s", rate},
      {"decode_steps", decode_steps},
      {"accepted_tokens_per_step", static_cast<double>(forced) / std::max<int64_t>(decode_steps, 1)},
      {"verify_steps", d.verifies},
      {"drafted_tokens", d.drafted},
      {"taken_tokens", d.taken},
      {"verify_cost", cost}};
  if (o.json)
    print_json(j);
  else
    std::printf(
        "%d turns, %lld forced tokens decoded at %.2f tok/s in %lld decode steps (%.2f a step); "
        "%lld drafted tokens taken of %lld\n",
        static_cast<int>(turns.size()), static_cast<long long>(forced), rate, static_cast<long long>(decode_steps),
        static_cast<double>(forced) / std::max<int64_t>(decode_steps, 1), static_cast<long long>(d.taken),
        static_cast<long long>(d.drafted));
  return 0;
}

}  // namespace tps
