#include "runtime/launcher_stdout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "runtime/error.h"

namespace tps {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Whether mpirun itself (Open MPI's HNP: the local daemon is the job's
// head) is this process's launcher, and passes output on as it is.
bool under_local_mpirun(std::string& why) {
  const std::string hnp = env("OMPI_MCA_orte_hnp_uri");
  if (hnp.empty()) return why = "not started by Open MPI's mpirun", false;
  if (hnp != env("OMPI_MCA_orte_local_daemon_uri")) return why = "mpirun runs on another host", false;
  for (const char* changes : {"OMPI_MCA_orte_tag_output", "OMPI_MCA_orte_timestamp_output",
                              "OMPI_MCA_orte_output_filename", "OMPI_MCA_orte_xml_output"}) {
    const std::string v = env(changes);
    if (!v.empty() && v != "0" && v != "false") return why = cat("mpirun's output is its own (", changes, ")"), false;
  }
  return true;
}

// mpirun's standard output itself (the same open file), or -1.
int shared_descriptor(pid_t launcher, std::string& why) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, launcher, 0));
  if (pidfd < 0) return why = cat("pidfd_open: ", std::strerror(errno)), -1;
  const int fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, STDOUT_FILENO, 0));
  const int err = errno;
  close(pidfd);
  if (fd < 0) why = cat("pidfd_getfd: ", std::strerror(err));
  return fd;
#else
  (void)launcher;
  return why = "no pidfd_getfd", -1;
#endif
}

// Without the right to take mpirun's descriptor (Yama's ptrace scope): a
// pipe or a device opened again through /proc is the same object (a
// regular file is not: its offset would not be shared). -1 otherwise.
int reopened(pid_t launcher, std::string& why) {
  const std::string link = cat("/proc/", launcher, "/fd/1");
  struct stat st {};
  if (stat(link.c_str(), &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
    return why += "; mpirun's standard output is not a pipe or a device to open again", -1;
  // Only what mpirun may write: with its standard output closed at start,
  // descriptor 1 is one of its own pipes' read end.
  std::ifstream info(cat("/proc/", launcher, "/fdinfo/1"));
  std::string key;
  unsigned flags = 0;
  while (info >> key && key != "flags:") info.ignore(1 << 10, '\n');
  if (!(info >> std::oct >> flags) || (flags & O_ACCMODE) == O_RDONLY) return open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Non-blocking, so that a pipe with no reader left fails (ENXIO) instead
  // of waiting for one; blocking again for the writes.
  const int fd = open(link.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENXIO) {  // no reader left: a pipe with none, where writes fail as they would
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) return -1;
    close(ends[0]);
    return ends[1];
  }
  if (fd < 0) return -1;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

bool adopt_launcher_stdout(std::string& why) {
  if (!under_local_mpirun(why)) return false;
  const pid_t launcher = getppid();
  int fd = shared_descriptor(launcher, why);
  if (fd < 0) fd = reopened(launcher, why);
  if (fd < 0) return false;
  // (A read-only descriptor stands for a standard output that is closed:
  // every write then fails, as it would without mpirun.)
  const bool done = dup2(fd, STDOUT_FILENO) >= 0;
  close(fd);
  why = done ? "standard output written to mpirun's directly" : cat("dup2: ", std::strerror(errno));
  return done;
}

}  // namespace tps
