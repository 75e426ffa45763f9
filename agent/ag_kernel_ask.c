/*
 * ag_kernel_ask: what a plain (non-magic) cell of the agent kernel does.
 *
 * Placeholder until the tool loop lands: it explains what is missing as an
 * error output. The loop replaces this file; see the seam in ag_kernel.h.
 */
#include "agent/ag_kernel.h"
#include "agent/ag_provider.h"

#include <stdlib.h>

static bool
s_configured(const ag_kernel_t *k)
{
    static const char *const vars[] = {"JUPYTER_AGENT_MODEL", "OPENAI_API_KEY",
                                       "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                       "ANTHROPIC_BASE_URL"};
    if (ag_kernel_model(k))
        return true;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return true;
    }
    return false;
}

int
ag_kernel_ask(ag_kernel_t *k, const char *request, err_t *err)
{
    (void)request;
    if (!s_configured(k))
        return err_set(err, ERR_PROVIDER,
                       "no LLM provider configured: set OPENAI_API_KEY, "
                       "ANTHROPIC_API_KEY or OPENAI_BASE_URL, or "
                       "JUPYTER_AGENT_MODEL=replay:FILE");
    ag_provider_t *p = ag_provider_new(ag_kernel_model(k), err);
    if (!p)
        return -1;
    ag_provider_destroy(&p);
    return err_set(err, ERR_PROVIDER,
                   "the agent's tool loop is not part of this build yet; "
                   "start a cell with %%%%python to run Python directly");
}
