// Ctrl-C at a terminal signals the terminal's foreground process group.
// Under mpirun that is mpirun's, which answers SIGINT by ending the whole
// job, while each rank runs in a process group of its own: Ctrl-C during an
// answer of `tpsrun chat` ended the chat. While an answer is generated the
// chat's rank holds this, which makes its own process group the terminal's
// foreground -- Ctrl-C then reaches that rank alone and stops the answer, as
// without mpirun -- and gives the terminal back to mpirun's group for the
// next line of input (which mpirun reads and passes on). mpirun, in the
// background meanwhile, is stopped by the terminal if it tries to read what
// is typed during an answer; it is continued when the terminal is given
// back. Nothing is done unless the terminal's foreground is the group of
// this process's parent (mpirun; a plain `tpsrun chat` is the foreground
// itself).
#pragma once

#include <sys/types.h>

namespace tps {

class TerminalForeground {
 public:
  TerminalForeground();
  ~TerminalForeground();
  TerminalForeground(const TerminalForeground&) = delete;
  TerminalForeground& operator=(const TerminalForeground&) = delete;

  bool taken() const { return tty_ >= 0; }

 private:
  int tty_ = -1;         // the controlling terminal, while taken
  pid_t previous_ = -1;  // its foreground group before
  void (*tstp_)(int) = nullptr;
};

}  // namespace tps
