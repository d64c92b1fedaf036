#include "runtime/terminal_foreground.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>

namespace tps {

namespace {

// tcsetpgrp from a background group: SIGTTOU (which would stop the process)
// blocked around it, as shells do.
bool set_foreground(int tty, pid_t group) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &old);
  const bool done = tcsetpgrp(tty, group) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return done;
}

// Whether process pid is stopped (state T in /proc/PID/stat).
bool stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t end = text.rfind(')');
  return end != std::string::npos && end + 2 < text.size() && text[end + 2] == 'T';
}

}  // namespace

TerminalForeground::TerminalForeground() {
  const int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (tty < 0) return;  // no controlling terminal: no Ctrl-C to route
  const pid_t foreground = tcgetpgrp(tty), mine = getpgrp();
  if (foreground < 0 || foreground == mine || foreground != getpgid(getppid()) || !set_foreground(tty, mine)) {
    close(tty);
    return;
  }
  tty_ = tty;
  previous_ = foreground;
  // Ctrl-Z would stop this rank alone, with the terminal held by it and the
  // shell waiting on mpirun: ignored while the terminal is ours.
  tstp_ = std::signal(SIGTSTP, SIG_IGN);
}

TerminalForeground::~TerminalForeground() {
  if (tty_ < 0) return;
  if (tcgetpgrp(tty_) == getpgrp()) set_foreground(tty_, previous_);
  close(tty_);
  std::signal(SIGTSTP, tstp_ == SIG_ERR ? SIG_DFL : tstp_);
  // mpirun, stopped if it read the terminal from the background (a line
  // typed during the answer), goes on: it reads that line now.
  if (stopped(getppid())) kill(-previous_, SIGCONT);
}

}  // namespace tps
