// Compiled as if it were part of serve/api: what every API shares cannot
// lean on one of them ("No such file").
#include "serve/chat/chat_request.h"
