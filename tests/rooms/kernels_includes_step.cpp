// Compiled as if it were a kernel (with tps_kernels' include path only): a
// kernel may not see the forward step, so this must fail with "No such file".
#include "engine/step/forward.h"
