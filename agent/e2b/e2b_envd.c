#include "agent/e2b/e2b_envd.h"

#include <string.h>

void
e2b_envd_handle(e2b_req_t *r, e2b_sandbox_t *sb)
{
    (void)sb;
    if (strcmp(r->path, "/health") == 0) {
        e2b_reply_empty(r, 204);
        return;
    }
    e2b_reply_error(r, 501, "%s %s: not yet", r->method, r->path);
}
