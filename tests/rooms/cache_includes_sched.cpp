// Compiled as if it were part of the KV and prompt cache (tps_cache's include
// path only): the cache holds blocks and their files for whoever decides, so
// it may not see the scheduler that decides; this must fail with "No such
// file".
#include "engine/sched/scheduler.h"
