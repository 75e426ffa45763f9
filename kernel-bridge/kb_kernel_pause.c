/* kb_kernel_pause: pause a kernel with its memory and resume it
 * (kb_kernel.h). The launcher saves and restores the box
 * (kb_launcher_ops_t.pause/resume: the gVisor engine's checkpoint); here
 * the client goes before the pause and a new one connects after the
 * resume, through the same connection file: every ZeroMQ connection to
 * the kernel was closed by the box's relay when it let go of its host
 * stream.
 *
 * What this runsc cannot save is let go of first, inside the kernel: a
 * TCP socket in the box ends the checkpoint ("encoding error at object
 * tcp.endpoint") and the box with it. ipykernel's IOPub thread listens on
 * tcp://127.0.0.1 for the output of forked children (its "pipe"): we
 * close it on that thread before the pause and open it again after the
 * resume; any other TCP socket in the box refuses the pause, the kernel
 * untouched. */
#include "kb_kernel.h"
#include "kb_kernel_impl.h"

#include "common/clock.h"
#include "common/escape.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_conn.h"

#include <stdlib.h>
#include <string.h>

/* _ja_pause() and _ja_resume(), run in the kernel around a pause. */
extern const char kb_kernel_pause_py[]; /* kb_kernel_pause.py */

static bool
s_python(const kb_kernel_t *k)
{
    json_t *li = json_object_get(k->info ? kb_msg_content(k->info) : NULL,
                                 "language_info");
    const char *n = json_string_value(json_object_get(li, "name"));
    return n && strcmp(n, "python") == 0;
}

static char *
s_eval(kb_kernel_t *k, const char *def, const char *call, err_t *err)
{
    return kb_kernel_eval_after(k, def, call, 15000, err);
}

int
kb_kernel_pause(kb_kernel_t *k, const char *dir, const unsigned char *key,
                err_t *err)
{
    if (!k->launcher || !k->launcher->ops->pause)
        return err_set(err, ERR_USAGE,
                       "cannot pause kernel '%s' with its memory: only a "
                       "kernel in a box on the gVisor engine can be saved "
                       "(--engine gvisor); this one runs %s",
                       k->name ? k->name : "?",
                       k->launcher ? k->launcher->ops->name : "elsewhere");
    if (k->paused)
        return err_set(err, ERR_USAGE, "kernel '%s' is paused already",
                       k->name);
    if (k->dead)
        return err_set(err, ERR_KERNEL,
                       "kernel '%s' is not running: nothing to pause", k->name);
    if (k->launcher->ops->pause(k->launcher->self, NULL, key, err) < 0)
        return err_prefix(err, "cannot pause kernel '%s'", k->name);
    if (s_python(k)) {
        char *left = s_eval(k, kb_kernel_pause_py, "_ja_pause()", err);
        if (!left)
            return err_prefix(err, "preparing kernel '%s' for a pause",
                              k->name);
        if (strcmp(left, "''") != 0) {
            char *e = esc_dup(left, ESC_NAME);
            free(left);
            free(s_eval(k, kb_kernel_pause_py, "_ja_resume()", NULL));
            err_set(err, ERR_USAGE,
                    "cannot pause kernel '%s': TCP sockets are open in its "
                    "box (%.200s, hex address:port); gVisor's runsc "
                    "20221219 cannot save one (and would end the box): "
                    "close them and pause again",
                    k->name, e);
            free(e);
            return -1;
        }
        free(left);
    }
    kb_client_destroy(&k->client);
    if (k->launcher->ops->pause(k->launcher->self, dir, key, err) < 0) {
        k->dead = true;
        return err_prefix(err, "pausing kernel '%s'", k->name);
    }
    k->paused = true;
    return 0;
}

int
kb_kernel_resume(kb_kernel_t *k, const char *dir, const unsigned char *key,
                 err_t *err)
{
    if (!k->paused)
        return err_set(err, ERR_USAGE, "kernel '%s' is not paused",
                       k->name ? k->name : "?");
    if (k->launcher->ops->resume(k->launcher->self, dir, key, err) < 0)
        return err_prefix(err, "resuming kernel '%s'", k->name);
    k->paused = false;
    kb_conn_t conn;
    kb_conn_init(&conn);
    char *path = xasprintf("%s/kernel.json",
                           k->launcher->ops->run_dir(k->launcher->self));
    int rc = -1;
    if (kb_conn_load(&conn, path, err) < 0)
        goto out;
    if (kb_kernel_connect_client(k, &conn, err) < 0)
        goto out;
    kb_msg_t *info =
        kb_client_wait_ready(k->client, k->opts.startup_timeout_ms, err);
    if (!info)
        goto out;
    kb_msg_destroy(&k->info);
    k->info = info;
    if (s_python(k)) { /* forked children's output flows again */
        char *v = s_eval(k, kb_kernel_pause_py, "_ja_resume()", err);
        if (!v)
            goto out;
        free(v);
    }
    rc = 0;
out:
    if (rc < 0) {
        kb_client_destroy(&k->client);
        k->launcher->ops->kill(k->launcher->self);
        k->dead = true;
        err_prefix(err, "resuming kernel '%s'", k->name);
    }
    kb_conn_release(&conn);
    free(path);
    return rc;
}

bool
kb_kernel_paused(const kb_kernel_t *k)
{
    return k->paused;
}
