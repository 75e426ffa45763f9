/* The agent kernel's inner sandboxed session: started when a cell first
 * needs Python, stopped after --idle-timeout or --max-lifetime (see
 * ag_kernel_impl.h). Calls nothing else of ag_kernel*.c. */
#include "agent/kernel/ag_kernel_impl.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stop a session that was idle too long or lived too long (the policy's
 * --idle-timeout / --max-lifetime), freeing its sandbox; the next cell that
 * needs Python starts a fresh one and is told why its state is gone. */
void
ag_kernel_expire(ag_kernel_t *k)
{
    if (!k->session)
        return;
    int64_t now = clock_mono_ms();
    int idle = k->inner->idle_timeout_ms, life = k->inner->max_lifetime_ms;
    const char *why = NULL;
    int limit = 0;
    if (idle > 0 && now - k->session_used_ms >= idle)
        why = "idle", limit = idle;
    else if (life > 0 && now - k->session_started_ms >= life)
        why = "running", limit = life;
    if (!why)
        return;
    ag_session_destroy(&k->session);
    free(k->expired_note);
    k->expired_note = xasprintf(
        "jupyter-agent: the Python session was stopped after %g s %s "
        "(--%s %g); a fresh one starts now: its variables and the files in "
        "/mnt/data are gone\n",
        limit / 1000.0, why,
        strcmp(why, "idle") == 0 ? "idle-timeout" : "max-lifetime",
        limit / 1000.0);
}

ag_session_t *
ag_kernel_session(ag_kernel_t *k, err_t *err)
{
    ag_kernel_expire(k);
    if (k->session) {
        k->session_used_ms = clock_mono_ms();
        return k->session;
    }
    if (k->expired_note && k->cell) {
        kb_server_stream(k->server, k->cell, "stderr", k->expired_note);
        free(k->expired_note);
        k->expired_note = NULL;
    }
    k->session = ag_session_start(k->inner, err);
    if (!k->session) {
        if (err && !err->text[0])
            err_set(err, ERR_SANDBOX,
                    "the sandboxed Python session could not be started");
        return NULL;
    }
    k->session_started_ms = k->session_used_ms = clock_mono_ms();
    ag_session_print_warnings(k->session, stderr);
    ag_session_record_kernel(k->session, k->record);
    return k->session;
}
