#include "agent/e2b/e2b_process.h"

#include "agent/e2b/e2b_connect.h"

void
e2b_process_handle(e2b_req_t *r, e2b_sandbox_t *sb, const char *method)
{
    (void)sb;
    e2b_connect_error(r, "unimplemented",
                      "process.Process/%s is not supported yet: running "
                      "commands inside a sandbox (commands.run, pty) comes "
                      "with issue 26's commands part; runCode works",
                      method);
}
