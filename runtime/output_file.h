// The one way a tps tool writes a file a user names (tps-mkmodel's model,
// perplexity's saved logits): what is at the path is never unlinked,
// truncated or replaced unless a whole new file takes its place.
//   - The target must be absent or a regular file: a device, directory,
//     FIFO, socket or symbolic link there is refused (as root, a rename over
//     /dev/null would replace the device node).
//   - It must not be one of the run's inputs: the same device and inode,
//     however its path is spelt (a hard link, ./x, a symlinked directory),
//     since replacing the model a job reads or the text it scores loses it.
//   - The bytes go to a new file beside the target (TARGET.tmp-XXXXXX,
//     created exclusively: nothing that exists is ever opened for writing),
//     renamed over it by commit() once they are on disk, the target checked
//     again just before.
//   - A temporary never outlives its writer: the destructor removes it when
//     commit() was not reached (an error), and SIGINT, SIGTERM and SIGHUP
//     remove every live temporary before they end the process, when the
//     program leaves them at their default action. (SIGKILL cannot be
//     caught; what it leaves is named *.tmp-*.)
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tps {

// A file's identity: the same file whatever path names it.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId&) const = default;
};

// The identities of the inputs that exist (following symbolic links).
std::vector<FileId> file_ids(const std::vector<std::string>& paths);

// Throws InputError when a writer may not put a file at `path`: it exists as
// anything but a regular file, or it is one of `inputs`. `flag` (e.g.
// "--save-logits") comes first in the message when given.
void check_output_target(const std::string& path, const std::vector<FileId>& inputs, const std::string& flag = "");

class OutputFile {
 public:
  // Checks the target, then creates the temporary beside it. inputs: the
  // files the run reads.
  OutputFile(std::string path, const std::vector<std::string>& inputs, std::string flag = "");
  ~OutputFile();  // not committed: the temporary goes
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Throws Error naming the target when the bytes cannot all be written.
  void write(const void* data, size_t bytes);
  // Flushes the bytes to disk and closes the temporary; throws Error.
  void finish();
  // finish(), then the target checked again and the temporary renamed over
  // it; throws InputError or Error, the temporary then removed.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temporary() const { return temp_; }

 private:
  std::string what() const;  // the flag and the target, for messages
  std::string path_, flag_, temp_;
  std::vector<FileId> inputs_;
  std::FILE* out_ = nullptr;
  int slot_ = -1;  // in the list the signal handlers clean
  bool finished_ = false, committed_ = false;
};

}  // namespace tps
