#include "launch/generate_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "engine/text/generated_text.h"
#include "launch/output_format.h"
#include "launch/rank_run.h"
#include "launch/run_report.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mapped_file.h"
#include "runtime/process.h"
#include "runtime/stop_signal.h"

namespace tps {
namespace {

// The most bytes -f reads: far past what any context holds (131,072
// positions of English text are about 0.5 MiB), and where a stream that
// never ends (/dev/zero, `yes |`) stops instead of filling the memory.
constexpr size_t kMaxPromptFileBytes = size_t{64} << 20;

// The whole of `path` ("-": standard input) as it is, of at most
// kMaxPromptFileBytes; InputError naming the file and the problem. A pipe
// (`-f <(command)`) is read to its end.
std::string read_prompt_file(const std::string& path) {
  const bool from_stdin = path == "-";
  const std::string name = from_stdin ? "standard input" : path;
  // O_NONBLOCK only to open: a FIFO no one writes to must not wait for a
  // writer (it reads as empty); the reads wait for a pipe's writer.
  const int fd = from_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(cat(name, ": cannot open: ", std::strerror(errno)));
  if (!from_stdin) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  int error = 0;
  char chunk[1 << 16];
  while (text.size() <= kMaxPromptFileBytes) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : 0;
      break;
    }
    text.append(chunk, static_cast<size_t>(n));
  }
  if (!from_stdin) ::close(fd);
  if (error != 0) throw InputError(cat(name, ": cannot read: ", std::strerror(error)));
  if (text.size() > kMaxPromptFileBytes)
    throw InputError(cat(name, ": more than the ", kMaxPromptFileBytes >> 20, " MiB a prompt file may have"));
  if (text.empty()) throw InputError(cat(name, ": empty, no prompt"));
  return text;
}

// -f's prompt, read by rank 0 alone (under mpirun only it has the standard
// input; only it adds sequences), which tells the others whether it could:
// a file it cannot read ends every rank alike, in one line.
std::string prompt_from_file(const std::string& path, const MpiSession& mpi) {
  std::string text, problem;
  if (mpi.rank() == 0) try {
      text = read_prompt_file(path);
    } catch (const InputError& e) {
      problem = e.what();
    }
  problem = mpi.broadcast_from_root(problem);
  if (!problem.empty()) throw InputError(problem);
  return text;
}

// The prompts: -p, the whole of -f, or the lines of --prompts-file (empty
// lines skipped).
std::vector<std::string> read_prompts(const RunOptions& o, const MpiSession& mpi) {
  if (!o.prompt_file.empty()) return {prompt_from_file(o.prompt_file, mpi)};
  if (o.prompts_file.empty()) return {o.prompt};  // never empty: the command line refuses that
  std::istringstream in(read_text_file(o.prompts_file));
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) prompts.push_back(line);
  if (prompts.empty()) throw InputError(cat(o.prompts_file, ": no prompts (one per line)"));
  return prompts;
}

// The prompt's tokens: the text as is (control tokens parsed), or rendered
// as a harmony chat with --chat.
std::vector<int32_t> encode_prompt(const RunOptions& o, const Tokenizer& tokenizer, const std::string& text) {
  if (!o.chat) return tokenizer.encode(text, true);
  return render_chat_prompt(text, ChatOptions{"", o.reasoning, ""},
                            [&](const std::string& s) { return tokenizer.encode(s); });
}

// Rank 0: the sequences, added to the generator.
void add_sequences(const RunOptions& o, const SamplerParams& sp, const std::vector<std::string>& prompts, int n_seq,
                   const std::optional<ConstraintSpec>& constraint, const Tokenizer& tokenizer, Generator& gen,
                   RunRecord& rec) {
  for (int i = 0; i < n_seq; ++i) {
    Followed f(i, encode_prompt(o, tokenizer, prompts[i % prompts.size()]), TextOptions{o.chat, o.show_analysis});
    rec.prompt_tokens += static_cast<int>(f.prompt.size());
    SequenceParams params;
    params.sampler = sp;
    params.sampler.seed = sp.seed + static_cast<uint64_t>(i);
    params.max_new_tokens = o.max_new_tokens;
    params.top_logprobs = o.top_logprobs;
    params.constraint = constraint;
    const int id = gen.add(f.prompt, params);
    rec.seqs.emplace(id, std::move(f));
  }
}

}  // namespace

int run_generate(const RunOptions& given, const MpiSession& mpi, const RankSetup& setup) {
  RunOptions o = given;
  SamplerParams sp = o.sampler;
  validate(sp);
  if (o.max_new_tokens < 1) throw InputError(cat("-n ", o.max_new_tokens, ": expected at least 1 token"));
  const std::vector<std::string> prompts = read_prompts(o, mpi);
  const int n_seq = o.prompts_file.empty() ? o.parallel : static_cast<int>(prompts.size());
  const bool root = mpi.rank() == 0, one = n_seq == 1;

  GgufFile file = open_model(o, mpi);
  resolve_cache_ram(o, mpi, setup, file);
  RankRun r(o, mpi, setup, Clock::now(), std::move(file));
  const Model& m = r.model;
  // One seed for every rank: rank 0's, random unless given. Sequence i
  // samples with seed + i.
  if (!o.seed_given) sp.seed = std::random_device{}();
  r.exchange.broadcast(&sp.seed, sizeof sp.seed, 0);
  Generator gen(m, r.pool, r.exchange, generator_options(o));
  // Every rank, into its generator's cache: each refuses alike, and none
  // compiles it again when it is announced.
  const std::optional<ConstraintSpec> constraint = output_format_spec(o, gen.constraints());
  r.log_kv_pool(gen);

  RunRecord rec;
  rec.seed = sp.seed;
  if (root) add_sequences(o, sp, prompts, n_seq, constraint, m.tokenizer, gen, rec);

  // One sequence streams its text.
  const Clock::time_point t0 = Clock::now();
  int started = 0;
  Generator::Events events;
  events.token = [&](int id, const Pick& p, SequenceEnd end) {
    Followed& f = rec.seqs.at(id);
    const double now = seconds_since(t0);
    if (f.first_token < 0) {
      f.first_token = now;
      f.reused = gen.scheduler().sequence(id).reused;
      f.restored = gen.scheduler().sequence(id).restored;
      if (++started == n_seq) rec.all_started = now;
    } else if (rec.all_started >= 0) {
      ++rec.decode_tokens;
    }
    f.last_token = now;
    if (end == SequenceEnd::constraint) {  // no token comes with it
      f.text.finish(sequence_end_name(end));
      return true;
    }
    if (o.top_logprobs > 0) f.logprobs.push_back(logprob_json(p));
    const std::string shown = f.text.accept(p.id, m.tokenizer);
    f.shown += shown;
    if (one && !o.json) {
      std::fwrite(shown.data(), 1, shown.size(), stdout);
      flush_stdout();  // lost output ends the run now, not after the last token
    }
    if (end != SequenceEnd::none) f.text.finish(sequence_end_name(end));
    return true;
  };
  events.waiting = [&](int id, const std::string& why) {
    log_info("sequence ", rec.seqs.at(id).index, " waits: ", why);
  };
  // SIGTERM or Ctrl-C (to mpirun, which passes them on) stop the run at its
  // next step: what was generated is printed, then the job ends with 128 +
  // the signal. (While the model loads they end it at once.)
  catch_stop_signals();
  events.between_steps = [](bool idle) { return !idle && stop_signal() == 0; };
  gen.run(events);
  rec.seconds = seconds_since(t0);
  int stopped_by = root ? stop_signal() : 0;  // rank 0's word: the others may see the signal later or not at all
  r.exchange.broadcast(&stopped_by, sizeof stopped_by, 0);
  const std::string signal_name = stopped_by ? cat("SIG", sigabbrev_np(stopped_by)) : "";
  if (root && stopped_by != 0)
    for (auto& [id, f] : rec.seqs)
      if (!f.text.done()) f.text.finish(signal_name);

  const std::vector<RankStats> ranks = gather_rank_stats(r, gen);
  if (root) report_generation(o, rec, ranks, r, gen, setup);
  if (stopped_by != 0) throw Error("stopped by " + signal_name, 128 + stopped_by);
  int gave_up = 0;  // rank 0's count: only it knows how each sequence ended
  if (root)
    for (const auto& [id, f] : rec.seqs) gave_up += f.text.stop() == sequence_end_name(SequenceEnd::constraint);
  r.exchange.broadcast(&gave_up, sizeof gave_up, 0);
  if (gave_up > 0)
    throw Error(cat(gave_up,
                    " sequence(s) ended early: the output constraint (--json-schema or --grammar) needed more "
                    "work for one token than the per-token limit allows"));
  return 0;
}

}  // namespace tps
