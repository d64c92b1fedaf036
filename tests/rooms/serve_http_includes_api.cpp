// Compiled as if it were part of serve/http: the HTTP layer knows no API,
// so the APIs' shared room is out of its sight ("No such file").
#include "serve/api/job.h"
