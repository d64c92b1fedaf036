#include "runtime/stop_signal.h"

#include <atomic>
#include <csignal>

namespace tps {

namespace {
std::atomic<int> received{0};
extern "C" void on_stop_signal(int sig) { received = sig; }
}  // namespace

void catch_stop_signals() {
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) std::signal(sig, on_stop_signal);
}

int stop_signal() { return received; }

}  // namespace tps
