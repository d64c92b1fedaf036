// Under Open MPI's mpirun a rank's standard output is a pipe to mpirun,
// which writes it on and ignores its own write errors: a full disk
// (> /dev/full), a closed standard output (>&-) or a reader gone (| head)
// lost the output and still ended the job with exit 0, since no rank saw a
// failed write. The rank that prints calls this: when mpirun runs on its
// host and passes output on unchanged (no --tag-output, --timestamp-output,
// --output-filename, --xml), the rank's standard output becomes mpirun's
// own -- the same open file, its offset and mode shared -- so that a failed
// write fails in the rank, which says so and ends the job non-zero.
// Elsewhere (another launcher, rank 0 on another host, a kernel or policy
// that refuses) nothing changes. Call before anything is written.
#pragma once

#include <string>

namespace tps {

// Whether standard output is now mpirun's; `why` says what was done or not
// (for the debug log).
bool adopt_launcher_stdout(std::string& why);

}  // namespace tps
