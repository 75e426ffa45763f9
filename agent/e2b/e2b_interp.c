#include "agent/e2b/e2b_interp.h"

#include <string.h>

void
e2b_interp_handle(e2b_req_t *r, e2b_sandbox_t *sb)
{
    (void)sb;
    if (strcmp(r->path, "/health") == 0) {
        e2b_reply_json(r, 200, json_string("OK"));
        return;
    }
    e2b_reply_error(r, 501, "%s %s: not yet", r->method, r->path);
}
