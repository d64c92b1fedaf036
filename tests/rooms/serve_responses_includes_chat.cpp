// Compiled as if it were part of serve/responses: one API cannot see
// another's headers ("No such file"); what both need belongs in serve/api.
#include "serve/chat/chat_text.h"
