/* Placeholder until sandbox/sb_sandbox lands: refuses, never falls back. */
#include "kb_launch_sandbox.h"

kb_launcher_t *
kb_launcher_sandbox_new(const struct sb_policy *policy, err_t *err)
{
    (void)policy;
    err_set(err, ERR_SANDBOX, "the sandbox launcher is not built yet");
    return NULL;
}
