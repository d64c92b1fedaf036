#include "launch/chat_command.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>

#include "engine/text/generated_text.h"
#include "engine/text/harmony.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/terminal_foreground.h"

namespace tps {

namespace {

// Ctrl-C during an answer stops the answer and keeps the conversation; at
// the prompt it says how to leave. The one piece of state a signal handler
// may set.
std::atomic<bool> interrupted{false};
extern "C" void on_interrupt(int) { interrupted = true; }

const char* kHelp =
    "commands: /reset (a new conversation), /stats (the last answer's speed), /reasoning low|medium|high, "
    "/quit (or Ctrl-D); Ctrl-C stops an answer\n";

// The terminal side of the chat, on rank 0.
class Chat {
 public:
  Chat(const RunOptions& o, Generator& gen, const Tokenizer& tok) : o_(o), gen_(gen), tok_(tok) {
    conversation_.reasoning = o.reasoning;
  }

  // Between steps: when nothing runs, the next line of input.
  bool between_steps(bool idle) {
    if (!idle) return true;
    if (answering_) finish_answer();
    for (;;) {
      std::printf("> ");
      flush_stdout();
      std::string line;
      interrupted = false;
      if (!std::getline(std::cin, line)) {
        if (interrupted && std::cin.bad() == false) {  // Ctrl-C at the prompt
          std::cin.clear();
          std::printf("\n(Ctrl-D or /quit leaves)\n");
          continue;
        }
        std::printf("\n");
        return false;
      }
      if (line.empty()) continue;
      if (line[0] == '/') {
        if (!command(line)) return false;
        continue;
      }
      start_answer(line);
      return true;
    }
  }

  bool token(const Pick& p, SequenceEnd end) {
    const double now = seconds_since(t0_);
    if (first_token_ < 0) first_token_ = now, reused_ = gen_.scheduler().sequence(seq_).reused;
    if (end == SequenceEnd::constraint) {  // no token comes with it
      text_.finish(sequence_end_name(end));
      return true;
    }
    const std::string shown = text_.accept(p.id, tok_);
    answer_ += shown;
    std::fwrite(shown.data(), 1, shown.size(), stdout);
    flush_stdout();  // lost output ends the chat
    if (end != SequenceEnd::none) {
      text_.finish(sequence_end_name(end));
    } else if (interrupted) {
      text_.finish("interrupted");
      return false;
    }
    return true;
  }

 private:
  bool command(const std::string& line) {
    if (line == "/quit" || line == "/exit") return false;
    if (line == "/reset") {
      conversation_.messages.clear();
      std::printf("(a new conversation)\n");
    } else if (line == "/stats") {
      if (generated_ == 0)
        std::printf("(no answer yet)\n");
      else
        std::printf(
            "last answer: %d tokens, first after %.2f s, %.2f tok/s after it; prompt %d tokens, %d of them "
            "from the prefix cache (%s)\n",
            generated_, first_token_, generated_ > 1 ? (generated_ - 1) / (last_ - first_token_) : 0.0, prompt_,
            reused_, stop_.c_str());
    } else if (line.starts_with("/reasoning")) {
      const std::string level = line.size() > 11 ? line.substr(11) : "";
      if (level == "low" || level == "medium" || level == "high") {
        conversation_.reasoning = level;
        std::printf("(reasoning: %s)\n", level.c_str());
      } else {
        std::printf("(/reasoning low, medium or high; now %s)\n", conversation_.reasoning.c_str());
      }
    } else {
      std::printf("%s", kHelp);
    }
    return true;
  }

  void start_answer(const std::string& line) {
    conversation_.messages.push_back({"user", "", "", "", line});
    std::vector<int32_t> prompt =
        render_conversation(conversation_, [this](const std::string& s) { return tok_.encode(s); });
    SequenceParams params;
    params.sampler = o_.sampler;
    params.max_new_tokens = o_.max_new_tokens;
    if (!o_.seed_given) params.sampler.seed = std::random_device{}();
    prompt_ = static_cast<int>(prompt.size());
    try {
      seq_ = gen_.add(std::move(prompt), params);
    } catch (const InputError& e) {
      std::printf("(%s; /reset starts a new conversation)\n", e.what());
      conversation_.messages.pop_back();
      return;
    }
    text_ = GeneratedText(TextOptions{true, o_.show_analysis});
    answer_.clear();
    first_token_ = -1, reused_ = 0;
    t0_ = Clock::now();
    interrupted = false;
    answering_ = true;
    foreground_.emplace();  // Ctrl-C to this rank alone while it answers
  }

  void finish_answer() {
    answering_ = false;
    foreground_.reset();  // the terminal back to mpirun, which reads the next line
    const std::string tail = text_.flush();
    answer_ += tail;
    std::printf("%s\n", tail.c_str());
    if (text_.stop() == "interrupted") std::printf("(stopped)\n");
    if (text_.stop() == sequence_end_name(SequenceEnd::context))
      std::printf("(the context is full: /reset starts a new conversation)\n");
    generated_ = static_cast<int>(text_.generated().size());
    last_ = seconds_since(t0_);
    stop_ = text_.stop();
    // The answer joins the conversation as harmony keeps earlier turns:
    // their final message only.
    conversation_.messages.push_back({"assistant", "final", "", "", answer_});
  }

  const RunOptions& o_;
  Generator& gen_;
  const Tokenizer& tok_;
  Conversation conversation_;
  GeneratedText text_{TextOptions{}};
  std::string answer_, stop_;
  bool answering_ = false;
  int seq_ = -1, prompt_ = 0, reused_ = 0, generated_ = 0;
  double first_token_ = -1, last_ = 0;
  Clock::time_point t0_;
  std::optional<TerminalForeground> foreground_;  // while an answer runs (runtime/terminal_foreground.h)
};

}  // namespace

RunMode add_chat_command(CLI::App& app) {
  CLI::App* chat =
      app.add_subcommand("chat",
                         "an interactive chat in the terminal (harmony, multi-turn, streaming; Ctrl-C stops an answer; "
                         "/reset, /stats, /reasoning low|medium|high, /quit)");
  chat->fallthrough();
  return {
      chat,
      {run_group::model, run_group::prefix_cache, run_group::speculation, run_group::sampling, run_group::chat_format}};
}

int run_chat(const RunOptions& given, const MpiSession& mpi, const RankSetup& setup) {
  GgufFile file = open_model(given, mpi);
  RunOptions o = given;  // one conversation, as long as the model and memory allow unless --ctx says
  o.parallel = 1;
  if (!o.context_given) o.context = default_context(o, mpi, setup, file);
  resolve_cache_ram(o, mpi, setup, file);
  RankRun r(o, mpi, setup, Clock::now(), std::move(file));
  Generator gen(r.model, r.pool, r.exchange, generator_options(o));
  if (mpi.rank() != 0) {
    gen.run({});
    return 0;
  }
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: a read at the prompt returns
  std::printf("tps chat with %s (%s). %s", o.model.c_str(), o.reasoning.c_str(), kHelp);
  Chat chat(o, gen, r.model.tokenizer);
  Generator::Events ev;
  ev.between_steps = [&](bool idle) { return chat.between_steps(idle); };
  ev.token = [&](int, const Pick& p, SequenceEnd end) { return chat.token(p, end); };
  ev.waiting = [](int, const std::string&) {};
  gen.run(ev);
  return 0;
}

}  // namespace tps
