// SIGTERM and SIGINT (and SIGUSR1, which mpirun passes on and then ends with
// exit 0) ask a running tool to stop at its next step: the one piece of
// state a signal handler may set. Every rank takes them (mpirun passes them
// on); rank 0 acts, and the others end with it.
#pragma once

namespace tps {

// Installs the handlers for the three signals.
void catch_stop_signals();

// The stop signal received (its number), 0 while none.
int stop_signal();

}  // namespace tps
