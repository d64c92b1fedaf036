// Compiled as if it were part of serve/chat: the rooms below it (api, http)
// stay visible.
#include "serve/api/job.h"
#include "serve/http/route.h"
