// tpsrun replay: what speculation gives when the model writes a known text.
// The transcript is a Chat Completions request body (messages, optional
// tools); each assistant turn is a sequence whose prompt is the
// conversation before it (so the prefix cache holds the turns before, as a
// server's would) and whose tokens are forced: the generator decodes them as
// generation would -- one a step with --speculate off, drafted and checked
// otherwise -- the "model's choice" being the transcript's token. Wall time
// is real: random-weight test models cannot show by generating what a
// model that repeats its context gets, a replay of that text can.
//
// Prints the forced tokens decoded per second (each turn's time from its
// first token to its last), the decode steps, the tokens each gave, the
// speculation counters and the decode steps' cost by their token count (the
// verify-cost table).
#pragma once

#include <string>

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

struct ReplayOptions {
  std::string transcript;  // a Chat Completions request body (JSON)
};

// Registers `tpsrun replay` and its --transcript.
RunMode add_replay_command(CLI::App& app, ReplayOptions& replay);

// Collective: every rank calls it with the same options.
int run_replay(const RunOptions& options, const ReplayOptions& replay, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
