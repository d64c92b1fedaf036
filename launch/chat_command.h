// `tpsrun chat`: an interactive chat in the terminal on the same engine --
// harmony turns (each reusing the conversation's cached prefix), the answer
// streamed as it comes; Ctrl-C stops an answer and keeps the conversation;
// /reset, /stats, /reasoning low|medium|high, /quit.
#pragma once

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

// `tpsrun chat`.
RunMode add_chat_command(CLI::App& app);

// Collective: rank 0 talks to the terminal, every rank runs every step.
int run_chat(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
