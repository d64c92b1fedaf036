// Compiled as if it were part of serve/messages: one API cannot see
// another's headers ("No such file"); what both need belongs in serve/api.
#include "serve/responses/response_store.h"
