// Compiled as if it were part of the forward step (tps_step's include path
// only): the step reads and writes the KV pool, so it must compile.
#include "engine/cache/kv_pool.h"
