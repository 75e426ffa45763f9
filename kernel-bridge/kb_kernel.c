#include "kb_kernel.h"
#include "kb_kernel_impl.h"

#include "common/clock.h"
#include "common/escape.h"
#include "common/log.h"
#include "common/strv.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEFAULT_STARTUP_MS 60000
#define DEFAULT_GRACE_MS 5000
#define STDERR_CAP (1 << 20)
#define STDERR_TAIL 4096
/* How long removing a gateway kernel's private directory may take before
 * the kernel is deleted: on a normal end, and from kb_kernel_kill. */
#define REMOVE_WORKDIR_MS 5000
#define REMOVE_WORKDIR_QUICK_MS 1000

int
kb_kernel_connect_client(kb_kernel_t *k, const kb_conn_t *conn, err_t *err)
{
    kb_client_opts_t copts = {.max_output_bytes = k->opts.max_output_bytes};
    k->client = kb_client_new(conn, &copts, err);
    if (!k->client)
        return -1;
    kb_client_watch_fd(k->client, k->launcher->ops->pidfd(k->launcher->self));
    return 0;
}

/* The kernel's environment: the launcher's rules plus what the kernelspec
 * and the caller add (later entries win). */
static char **
s_build_env(kb_kernel_t *k)
{
    size_t n = 0, cap = 8;
    char **extra = xcalloc(cap, sizeof *extra);
    extra[n++] = xstrdup("PYDEVD_DISABLE_FILE_VALIDATION=1");
    extra[n++] = xstrdup("JPY_SESSION_NAME=jupyter-agent");
    const char *key;
    json_t *value;
    json_object_foreach(k->spec.env, key, value)
    {
        if (!json_is_string(value))
            continue;
        extra = xrealloc(extra, (n + 2) * sizeof *extra);
        extra[n++] = xasprintf("%s=%s", key, json_string_value(value));
    }
    for (char *const *e = k->opts.extra_env; e && *e; e++) {
        extra = xrealloc(extra, (n + 2) * sizeof *extra);
        extra[n++] = xstrdup(*e);
    }
    extra[n] = NULL;
    char **env = k->launcher->ops->build_env(k->launcher->self, extra);
    strv_free(extra);
    return env;
}

char *
kb_kernel_stderr_tail(kb_kernel_t *k)
{
    if (k->out_fd < 0)
        return xstrdup("");
    char *buf = xmalloc(STDERR_CAP + 1);
    ssize_t n = pread(k->out_fd, buf, STDERR_CAP, 0);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    size_t len = strlen(buf); /* the sealed file is NUL-padded */
    char *tail = xstrdup(len > STDERR_TAIL ? buf + len - STDERR_TAIL : buf);
    free(buf);
    return tail;
}

/* A 1 MiB memory file for the kernel's own stdout/stderr, sealed so the
 * kernel cannot grow it: writes past the end fail instead of using memory. */
static int
s_make_out_fd(void)
{
    int fd = memfd_create("kernel-stderr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, STDERR_CAP) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int
s_fail_with_stderr(kb_kernel_t *k, err_t *err)
{
    char *tail = kb_kernel_stderr_tail(k);
    /* Keep the last few lines: that is where Python puts the reason. */
    const char *start = tail;
    int lines = 0;
    for (const char *p = tail + strlen(tail); p > tail; p--)
        if (p[-1] == '\n' && p[0] && ++lines > 12) {
            start = p;
            break;
        }
    if (*start && err) {
        /* Printed by us: escaped (the kernel's own lines stay lines). */
        char *shown = esc_dup(start, ESC_KEEP_LINES);
        static const char head[] = "\nkernel output:\n";
        size_t used = strlen(err->text);
        /* Room left for a caller's hint after it (one line of advice). */
        size_t keep = sizeof err->text / 4;
        size_t room =
            sizeof err->text - used > keep ? sizeof err->text - used - keep : 0;
        /* Drop whole lines from the front until the rest fits: the last
         * line (the exception) must survive, it names the reason. */
        const char *from = shown;
        while (strlen(from) + sizeof head > room) {
            const char *nl = strchr(from, '\n');
            if (!nl || !nl[1]) {
                from += strlen(from) + sizeof head - room;
                break;
            }
            from = nl + 1;
        }
        if (room > sizeof head)
            snprintf(err->text + used, room, "%s%s", head, from);
        free(shown);
    }
    free(tail);
    return -1;
}

/* Append copies of `extra` (NULL-terminated, may be NULL) to *argv. */
static void
s_append_args(char ***argv, char *const *extra)
{
    size_t n = 0, m = 0;
    while ((*argv)[n])
        n++;
    while (extra && extra[m])
        m++;
    *argv = xrealloc(*argv, (n + m + 1) * sizeof **argv);
    for (size_t i = 0; i < m; i++)
        (*argv)[n + i] = xstrdup(extra[i]);
    (*argv)[n + m] = NULL;
}

/* Launch the kernel and wait for kernel_info. On failure everything
 * started here is torn down again. */
static int
s_launch(kb_kernel_t *k, err_t *err)
{
    kb_conn_t conn;
    char **argv = NULL, **env = NULL;
    char *conn_path = NULL, *prefix = NULL;
    int rc = -1;

    kb_conn_init(&conn);
    k->dead = false;
    const char *run_dir = k->launcher->ops->run_dir(k->launcher->self);
    const char *sock_dir = k->launcher->ops->sock_dir
                               ? k->launcher->ops->sock_dir(k->launcher->self)
                               : run_dir;
    prefix = xasprintf("%s/kernel", sock_dir);
    conn_path = xasprintf("%s/kernel.json", run_dir);
    if (kb_conn_init_ipc(&conn, prefix, err))
        goto out;
    free(conn.kernel_name);
    conn.kernel_name = xstrdup(k->name);
    if (kb_conn_save(&conn, conn_path, err) ||
        k->launcher->ops->adopt_file(k->launcher->self, conn_path, err))
        goto out;
    /* A sandboxed kernel reads (and rewrites) its copy in the socket dir,
     * put there by adopt_file. */
    if (k->launcher->ops->sock_dir) {
        char *inside = xasprintf("%s/kernel.json", sock_dir);
        argv = kb_kernelspec_expand_argv(&k->spec, inside);
        free(inside);
    } else {
        argv = kb_kernelspec_expand_argv(&k->spec, conn_path);
    }
    s_append_args(&argv, k->opts.extra_args);
    env = s_build_env(k);
    if (k->out_fd < 0)
        k->out_fd = s_make_out_fd();
    if (k->launcher->ops->prepare &&
        k->launcher->ops->prepare(k->launcher->self, &k->spec, err))
        goto out;
    if (k->launcher->ops->spawn(k->launcher->self, argv, env, k->out_fd, err))
        goto out;
    if (kb_kernel_connect_client(k, &conn, err) < 0)
        goto out;
    k->info = kb_client_wait_ready(k->client, k->opts.startup_timeout_ms, err);
    if (!k->info) {
        char why[256] = "", detail[sizeof err->text + 4] = "";
        if (err && err->code == ERR_TIMEOUT)
            snprintf(detail, sizeof detail, ": %s", err->text);
        if (k->launcher->ops->reap(k->launcher->self, 200, why, sizeof why))
            err_set(err, ERR_KERNEL, "kernel '%s' failed to start: %s", k->name,
                    why);
        else
            err_set(err, ERR_KERNEL,
                    "kernel '%s' did not become ready within %d s%s", k->name,
                    k->opts.startup_timeout_ms / 1000, detail);
        s_fail_with_stderr(k, err);
        goto out;
    }
    rc = 0;
out:
    if (rc) {
        char why[64];
        kb_client_destroy(&k->client);
        k->launcher->ops->kill(k->launcher->self);
        k->launcher->ops->reap(k->launcher->self, 2000, why, sizeof why);
        k->dead = true;
    }
    strv_free(env);
    strv_free(argv);
    kb_conn_release(&conn);
    free(conn_path);
    free(prefix);
    return rc;
}

/* Evaluate `expr` as the user expression of a silent execution within
 * timeout_ms, without kb_kernel_execute's interrupt and restart (it runs
 * while a kernel is started or deleted). Its text/plain value, a new
 * string, or NULL + err. */
char *
kb_kernel_eval_after(kb_kernel_t *k, const char *code, const char *expr,
                     int timeout_ms, err_t *err)
{
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    xo.user_expressions = json_pack("{s:s}", "r", expr);
    kb_output_t *out = kb_output_new(NULL, 1 << 16);
    char *value = NULL;
    kb_exec_t *x = kb_client_execute_start(k->client, code, &xo, err);
    json_decref(xo.user_expressions);
    if (x && kb_client_execute_wait(k->client, x, out, NULL,
                                    clock_mono_ms() + timeout_ms, err) == 0) {
        json_t *r = json_object_get(kb_output_user_expressions(out), "r");
        const char *v = json_string_value(
            json_object_get(json_object_get(r, "data"), "text/plain"));
        const char *ename = json_string_value(json_object_get(r, "ename"));
        if (v) {
            value = xstrdup(v);
        } else { /* the kernel's words: escaped */
            char *e = esc_dup(ename ? ename : "nothing", ESC_NAME);
            err_set(err, ERR_KERNEL, "its reply held no value (%.200s)", e);
            free(e);
        }
    }
    kb_exec_destroy(&x);
    kb_output_destroy(&out);
    return value;
}

/* "ab\x01" -> "616201": a path travels to and from the kernel as hex,
 * so no quoting is needed either way. New string. */
static char *
s_hex(const char *s)
{
    size_t n = strlen(s);
    char *h = xmalloc(2 * n + 1);
    return sodium_bin2hex(h, 2 * n + 1, (const unsigned char *)s, n);
}

/* The kernel's answer to the workdir expression: the repr of a lowercase
 * hex string ('2f746d70...') of an absolute path without NUL. The kernel
 * is not trusted: anything else is refused. New string or NULL. */
static char *
s_unhex_repr(const char *v)
{
    size_t n = strlen(v);
    if (n < 4 || n > 8192 || v[0] != '\'' || v[n - 1] != '\'' || n % 2 ||
        strspn(v + 1, "0123456789abcdef") != n - 2)
        return NULL;
    size_t len = (n - 2) / 2, got = 0;
    char *p = xmalloc(len + 1);
    if (sodium_hex2bin((unsigned char *)p, len, v + 1, n - 2, NULL, &got,
                       NULL) != 0 ||
        got != len || memchr(p, '\0', len) || p[0] != '/') {
        free(p);
        return NULL;
    }
    p[len] = '\0';
    return p;
}

/* opts.private_dir: change the kernel into its own directory, made now
 * (mkdtemp: a random name, mode 0700) or kept from before a restart. */
static int
s_enter_workdir(kb_kernel_t *k, err_t *err)
{
    char *hex = s_hex(k->workdir ? k->workdir : "");
    char *expr = xasprintf(
        "(lambda o, t, d: (o.chdir(d if d and o.path.isdir(d) else "
        "t.mkdtemp(prefix='jupyter-agent-')), o.makedirs('out', "
        "exist_ok=True), o.getcwd().encode().hex())[2])(__import__('os'), "
        "__import__('tempfile'), bytes.fromhex('%s').decode())",
        hex);
    free(hex);
    err_t e;
    char *v = kb_kernel_eval_after(k, "", expr, k->opts.startup_timeout_ms, &e);
    free(expr);
    if (!v)
        return err_set(err, ERR_KERNEL,
                       "kernel %s on %s: could not make its working "
                       "directory: %s",
                       k->remote_id, kb_gateway_url(k->gw), e.text);
    char *dir = s_unhex_repr(v);
    free(v);
    if (!dir)
        return err_set(err, ERR_KERNEL,
                       "kernel %s on %s: its answer for its working directory "
                       "is not a path",
                       k->remote_id, kb_gateway_url(k->gw));
    free(k->workdir);
    k->workdir = dir;
    return 0;
}

/* Remove the private directory through the kernel, if it still answers
 * within timeout_ms; best effort (the kernel is deleted next anyway). */
static void
s_remove_workdir(kb_kernel_t *k, int timeout_ms)
{
    if (!k->workdir || k->dead || k->deleted || !k->client)
        return;
    char *hex = s_hex(k->workdir);
    char *expr = xasprintf(
        "(lambda o, s, d: (o.chdir(o.path.dirname(d)), s.rmtree(d, "
        "ignore_errors=True), 1)[2])(__import__('os'), __import__('shutil'), "
        "bytes.fromhex('%s').decode())",
        hex);
    free(hex);
    err_t e;
    char *v = kb_kernel_eval_after(k, "", expr, timeout_ms, &e);
    if (!v)
        log_info("kernel %s: its directory was not removed: %s", k->remote_id,
                 e.text);
    free(v);
    free(expr);
}

/* Start the kernel on the gateway (or, on a restart, reconnect to it)
 * and wait for kernel_info over a new WebSocket session. */
static int
s_launch_remote(kb_kernel_t *k, err_t *err)
{
    k->dead = false;
    if (!k->remote_id) {
        k->remote_id = kb_gateway_start_kernel(k->gw, k->opts.kernel_name, err);
        if (!k->remote_id)
            return -1;
    }
    char session[37];
    kb_msg_new_uuid(session);
    kb_transport_t *tp = kb_gateway_connect(k->gw, k->remote_id, session, 0,
                                            k->opts.startup_timeout_ms, err);
    if (!tp)
        return -1;
    kb_client_opts_t copts = {.max_output_bytes = k->opts.max_output_bytes};
    k->client = kb_client_new_transport(&tp, session, &copts);
    k->info = kb_client_wait_ready(k->client, k->opts.startup_timeout_ms, err);
    if (!k->info) {
        err_prefix(err, "kernel %s on %s", k->remote_id, kb_gateway_url(k->gw));
        kb_client_destroy(&k->client);
        return -1;
    }
    if (k->opts.private_dir && s_enter_workdir(k, err)) {
        kb_client_destroy(&k->client);
        return -1;
    }
    return 0;
}

static kb_kernel_t *
s_start_remote(kb_kernel_t *k, err_t *err)
{
    k->gw = kb_gateway_new(k->opts.gateway, err);
    if (!k->gw || s_launch_remote(k, err)) {
        kb_kernel_destroy(&k);
        return NULL;
    }
    return k;
}

kb_kernel_t *
kb_kernel_start(const kb_kernel_opts_t *opts, err_t *err)
{
    kb_kernel_t *k = xcalloc(1, sizeof *k);
    k->out_fd = -1;
    if (opts)
        k->opts = *opts;
    if (!k->opts.startup_timeout_ms)
        k->opts.startup_timeout_ms = DEFAULT_STARTUP_MS;
    if (!k->opts.interrupt_grace_ms)
        k->opts.interrupt_grace_ms = DEFAULT_GRACE_MS;
    if (k->opts.gateway) {
        k->name = xstrdup(k->opts.kernel_name ? k->opts.kernel_name : "");
        return s_start_remote(k, err);
    }
    k->name = xstrdup(k->opts.kernel_name ? k->opts.kernel_name : "python3");
    if (kb_kernelspec_find(k->name, &k->spec, err)) {
        free(k->name);
        free(k);
        return NULL;
    }
    k->has_spec = true;
    if (kb_kernelspec_resolve_program(&k->spec, err)) {
        kb_kernel_destroy(&k);
        return NULL;
    }
    k->launcher = k->opts.launcher ? k->opts.launcher(k->opts.launcher_arg, err)
                                   : kb_launcher_plain_new(err);
    if (!k->launcher || s_launch(k, err)) {
        kb_kernel_destroy(&k);
        return NULL;
    }
    return k;
}

kb_kernel_t *
kb_kernel_attach(const char *connection_file, bool allow_unsigned, err_t *err)
{
    kb_conn_t conn;
    if (kb_conn_load(&conn, connection_file, err))
        return NULL;
    kb_kernel_t *k = xcalloc(1, sizeof *k);
    k->out_fd = -1;
    k->opts.interrupt_grace_ms = DEFAULT_GRACE_MS;
    k->name = xstrdup(conn.kernel_name[0] ? conn.kernel_name : "attached");
    kb_client_opts_t copts = {.allow_unsigned = allow_unsigned};
    k->client = kb_client_new(&conn, &copts, err);
    kb_conn_release(&conn);
    if (!k->client)
        goto fail;
    kb_client_use_heartbeat(k->client, true);
    if (kb_client_heartbeat(k->client, 5000) != 0) {
        err_set(err, ERR_KERNEL,
                "no kernel answers the heartbeat of %s (is it still running?)",
                connection_file);
        goto fail;
    }
    k->info = kb_client_wait_ready(k->client, 10000, err);
    if (!k->info) {
        err_prefix(err, "attaching to %s", connection_file);
        goto fail;
    }
    return k;
fail:
    kb_kernel_destroy(&k);
    return NULL;
}

void
kb_kernel_destroy(kb_kernel_t **pk)
{
    if (!pk || !*pk)
        return;
    kb_kernel_t *k = *pk;
    if (k->remote_id) {
        /* Even when it died: the server may have restarted it. */
        if (!k->deleted) {
            s_remove_workdir(k, REMOVE_WORKDIR_MS);
            kb_gateway_delete(k->gw, k->remote_id, NULL);
        }
    } else if (k->launcher && !k->dead) {
        kb_kernel_shutdown(k, NULL);
    }
    free(k->workdir);
    kb_client_destroy(&k->client);
    free(k->remote_id);
    kb_gateway_destroy(&k->gw);
    kb_launcher_destroy(&k->launcher);
    kb_msg_destroy(&k->info);
    if (k->has_spec)
        kb_kernelspec_release(&k->spec);
    if (k->out_fd >= 0)
        close(k->out_fd);
    free(k->name);
    free(k);
    *pk = NULL;
}

int
kb_kernel_finish(kb_kernel_t *k, err_t *err)
{
    if (!k || !k->launcher || k->remote_id)
        return 0;
    if (!k->dead)
        kb_kernel_shutdown(k, NULL);
    k->dead = true;
    return k->launcher->ops->finish
               ? k->launcher->ops->finish(k->launcher->self, err)
               : 0;
}

void
kb_kernel_hand_off(kb_kernel_t **pk)
{
    kb_kernel_t *k = pk ? *pk : NULL;
    if (k && k->launcher && !k->dead && k->launcher->ops->hand_off &&
        k->launcher->ops->hand_off(k->launcher->self) == 0)
        k->dead = true; /* someone else's now: no shutdown request */
    kb_kernel_destroy(pk);
}

kb_client_t *
kb_kernel_client(kb_kernel_t *k)
{
    return k->client;
}

json_t *
kb_kernel_info(const kb_kernel_t *k)
{
    return k->info ? kb_msg_content(k->info) : NULL;
}

const kb_kernelspec_t *
kb_kernel_spec(const kb_kernel_t *k)
{
    return k->has_spec ? &k->spec : NULL;
}

const char *
kb_kernel_launcher_name(const kb_kernel_t *k)
{
    if (k->gw)
        return "gateway";
    return k->launcher ? k->launcher->ops->name : "attached";
}

const char *
kb_kernel_gateway_url(const kb_kernel_t *k)
{
    return k->gw ? kb_gateway_url(k->gw) : NULL;
}

const char *
kb_kernel_workdir(const kb_kernel_t *k)
{
    return k->workdir;
}

const char *
kb_kernel_remote_id(const kb_kernel_t *k)
{
    return k->remote_id;
}

kb_launcher_t *
kb_kernel_launcher(kb_kernel_t *k)
{
    return k->launcher;
}

int
kb_kernel_interrupt(kb_kernel_t *k, err_t *err)
{
    if (k->gw)
        return kb_gateway_interrupt(k->gw, k->remote_id, err);
    bool by_message =
        !k->launcher || (k->has_spec && k->spec.interrupt_mode &&
                         strcmp(k->spec.interrupt_mode, "message") == 0);
    if (!by_message) {
        if (k->launcher->ops->signal(k->launcher->self, SIGINT) != 0)
            return err_errno(err, ERR_KERNEL, "cannot signal the kernel");
        return 0;
    }
    kb_msg_t *reply = kb_client_request(k->client, KB_CONTROL,
                                        "interrupt_request", NULL, 5000, err);
    if (!reply)
        return -1;
    kb_msg_destroy(&reply);
    return 0;
}

/* The kernel is gone: reap it and record why in `out`. */
static int
s_record_death(kb_kernel_t *k, kb_output_t *out, const char *werr_text,
               err_t *err)
{
    char why[1024] = "the kernel stopped answering";
    k->dead = true;
    if (k->gw && werr_text)
        snprintf(why, sizeof why, "%s", werr_text);
    if (k->launcher &&
        !k->launcher->ops->reap(k->launcher->self, 2000, why, sizeof why) &&
        werr_text) {
        /* Alive but unusable (e.g. it replaced a socket file with a link):
         * stop it, and say what the transport saw, not "died". */
        k->launcher->ops->kill(k->launcher->self);
        k->launcher->ops->reap(k->launcher->self, 2000, why, sizeof why);
        kb_output_set_died(out, werr_text);
        return err_set(err, ERR_KERNEL, "the kernel was stopped: %s",
                       werr_text);
    }
    kb_output_set_died(out, why);
    if (k->gw) /* the transport's words already say what happened */
        return err_set(err, ERR_KERNEL, "%s", why);
    return err_set(err, ERR_KERNEL, "the kernel died: %s", why);
}

/* What the kernel's side sent that we refused since `before`, for the end
 * of a timeout's error (those may be the replies the execution waited
 * for): "; the Jupyter server at URL sent 3 messages we refused
 * (oversized: 1, malformed: 2)", or "" when nothing was refused. */
static void
s_refused(kb_kernel_t *k, const kb_wire_stats_t *before, char *out, size_t size)
{
    char kinds[192];
    uint64_t n = kb_wire_stats_refused(before, kb_client_stats(k->client),
                                       kinds, sizeof kinds);
    out[0] = '\0';
    if (n && k->gw)
        snprintf(out, size,
                 "; the Jupyter server at %s sent %llu message%s we refused "
                 "(%s)",
                 kb_gateway_url(k->gw), (unsigned long long)n,
                 n == 1 ? "" : "s", kinds);
    else if (n)
        snprintf(out, size, "; the kernel sent %llu message%s we refused (%s)",
                 (unsigned long long)n, n == 1 ? "" : "s", kinds);
}

static int s_execute(kb_kernel_t *k, const char *code,
                     const kb_exec_opts_t *opts, int timeout_ms,
                     kb_output_t *out, const kb_exec_hooks_t *hooks,
                     err_t *err);

void
kb_kernel_observe(kb_kernel_t *k, const kb_exec_observer_t *obs)
{
    k->observer = obs;
}

int
kb_kernel_execute(kb_kernel_t *k, const char *code, const kb_exec_opts_t *opts,
                  int timeout_ms, kb_output_t *out,
                  const kb_exec_hooks_t *hooks, err_t *err)
{
    const kb_exec_observer_t *obs = k->observer;
    if (!obs)
        return s_execute(k, code, opts, timeout_ms, out, hooks, err);
    void *token = obs->begin(obs->arg, code, opts);
    err_t e = {0};
    int rc = s_execute(k, code, opts, timeout_ms, out, hooks, &e);
    obs->end(obs->arg, token, out, rc, &e);
    if (rc && err)
        *err = e;
    return rc;
}

static int
s_execute(kb_kernel_t *k, const char *code, const kb_exec_opts_t *opts,
          int timeout_ms, kb_output_t *out, const kb_exec_hooks_t *hooks,
          err_t *err)
{
    if (k->paused)
        return err_set(err, ERR_KERNEL,
                       "the kernel is paused (its memory saved to disk); "
                       "resume it first");
    if (k->dead)
        return err_set(err, ERR_KERNEL,
                       "the kernel is not running; restart it first");
    kb_wire_stats_t before = *kb_client_stats(k->client);
    kb_exec_t *x = kb_client_execute_start(k->client, code, opts, err);
    if (!x)
        return -1;
    int64_t deadline = timeout_ms > 0 ? clock_mono_ms() + timeout_ms : 0;
    err_t werr;
    int rc = kb_client_execute_wait(k->client, x, out, hooks, deadline, &werr);
    if (rc == 0)
        goto out;
    if (werr.code == ERR_KERNEL) {
        rc = s_record_death(k, out, werr.text, err);
        goto out;
    }
    /* Timed out or asked to stop: interrupt, then give it a grace period. */
    bool timed_out = werr.code == ERR_TIMEOUT;
    if (timed_out)
        kb_output_set_timed_out(out, true);
    else
        kb_output_set_interrupted(out, true);
    err_t ierr;
    if (kb_kernel_interrupt(k, &ierr))
        log_warn("interrupt: %s", ierr.text);
    int64_t grace = clock_mono_ms() + k->opts.interrupt_grace_ms;
    kb_exec_hooks_t quiet = hooks ? *hooks : (kb_exec_hooks_t){0};
    quiet.should_stop = NULL;
    int again = kb_client_execute_wait(k->client, x, out, &quiet, grace, &ierr);
    double secs = timeout_ms / 1000.0;
    char refused[512];
    s_refused(k, &before, refused, sizeof refused);
    if (again == 0) {
        rc = timed_out
                 ? err_set(err, ERR_TIMEOUT,
                           "timed out after %g s (interrupted; kernel state "
                           "kept)%s",
                           secs, refused)
                 : err_set(err, ERR_INTERRUPTED, "interrupted");
        goto out;
    }
    if (ierr.code == ERR_KERNEL) {
        rc = s_record_death(k, out, ierr.text, err);
        goto out;
    }
    /* Still busy after the grace period: kill and start afresh, unless
     * the caller exits right after (then a new kernel would only delay
     * its exit; the killed one is reaped by whoever the caller hands the
     * kernel to, or by kb_kernel_destroy). */
    int restarted = -1;
    if (k->no_restart && k->gw) {
        log_info("kernel ignored the interrupt; deleting it on the server");
        kb_gateway_delete(k->gw, k->remote_id, NULL);
        k->deleted = k->dead = true;
    } else if (k->no_restart && k->launcher) {
        log_info("kernel ignored the interrupt; killing it");
        k->launcher->ops->kill(k->launcher->self);
    } else {
        log_info("kernel ignored the interrupt; killing and restarting it");
        err_t rerr;
        restarted = kb_kernel_restart(k, &rerr);
    }
    if (timed_out)
        rc = err_set(err, ERR_TIMEOUT,
                     "timed out after %g s; the interrupt did not stop it "
                     "within %d s, so the kernel was killed%s%s",
                     secs, k->opts.interrupt_grace_ms / 1000,
                     restarted == 0  ? " and restarted (its state was lost)"
                     : k->no_restart ? ""
                                     : " (restart failed)",
                     refused);
    else
        rc = err_set(err, ERR_INTERRUPTED,
                     "interrupted; the kernel did not stop, so it was "
                     "killed%s",
                     restarted == 0 ? " and restarted (its state was lost)"
                                    : "");
out:
    kb_exec_destroy(&x);
    return rc;
}

void
kb_kernel_no_restart(kb_kernel_t *k)
{
    k->no_restart = true;
}

void
kb_kernel_on_restart(kb_kernel_t *k,
                     int (*fn)(kb_kernel_t *k, void *arg, err_t *err),
                     void *arg)
{
    k->opts.on_restart = fn;
    k->opts.on_restart_arg = arg;
}

static int s_restart(kb_kernel_t *k, err_t *err);

int
kb_kernel_restart(kb_kernel_t *k, err_t *err)
{
    if (s_restart(k, err))
        return -1;
    err_t herr = {0};
    if (!k->opts.on_restart || k->in_restart_hook)
        return 0;
    k->in_restart_hook = true;
    if (k->opts.on_restart(k, k->opts.on_restart_arg, &herr))
        log_warn("after the kernel restart: %s", herr.text);
    k->in_restart_hook = false;
    return 0;
}

static int
s_restart(kb_kernel_t *k, err_t *err)
{
    if (k->gw) {
        kb_client_destroy(&k->client);
        kb_msg_destroy(&k->info);
        if (kb_gateway_restart(k->gw, k->remote_id, err)) {
            k->dead = true;
            return -1;
        }
        return s_launch_remote(k, err);
    }
    if (!k->has_spec)
        return err_set(err, ERR_USAGE,
                       "cannot restart a kernel this program did not start");
    if (k->launcher && !k->dead) {
        char why[64];
        k->launcher->ops->kill(k->launcher->self);
        k->launcher->ops->reap(k->launcher->self, 5000, why, sizeof why);
    }
    kb_client_destroy(&k->client);
    kb_msg_destroy(&k->info);
    return s_launch(k, err);
}

bool
kb_kernel_alive(kb_kernel_t *k)
{
    if (k->dead || k->paused)
        return false;
    if (k->gw)
        return k->client && kb_client_heartbeat(k->client, 3000) == 0;
    if (k->launcher) {
        char why[64];
        if (k->launcher->ops->reap(k->launcher->self, 0, why, sizeof why)) {
            k->dead = true;
            return false;
        }
        return true;
    }
    return kb_client_heartbeat(k->client, 3000) == 0;
}

void
kb_kernel_kill(kb_kernel_t *k)
{
    if (k->gw && !k->deleted) {
        s_remove_workdir(k, REMOVE_WORKDIR_QUICK_MS);
        kb_gateway_delete(k->gw, k->remote_id, NULL);
        k->deleted = k->dead = true;
        return;
    }
    if (k->launcher && !k->dead) {
        char why[64];
        k->launcher->ops->kill(k->launcher->self);
        k->launcher->ops->reap(k->launcher->self, 2000, why, sizeof why);
        k->dead = true;
    }
}

int
kb_kernel_shutdown(kb_kernel_t *k, err_t *err)
{
    if (k->gw) { /* the server asks the kernel to shut down, then kills */
        s_remove_workdir(k, REMOVE_WORKDIR_MS);
        int rc = k->deleted ? 0
                            : kb_gateway_delete(k->gw, k->remote_id,
                                                k->dead ? NULL : err);
        k->deleted = k->dead = true;
        return rc;
    }
    if (!k->client)
        return 0;
    kb_msg_t *reply = kb_client_request(
        k->client, KB_CONTROL, "shutdown_request",
        json_pack("{s:b}", "restart", 0), k->opts.interrupt_grace_ms, err);
    kb_msg_destroy(&reply);
    if (k->launcher && !k->dead) {
        char why[64];
        if (!k->launcher->ops->reap(k->launcher->self,
                                    k->opts.interrupt_grace_ms, why,
                                    sizeof why)) {
            k->launcher->ops->kill(k->launcher->self);
            k->launcher->ops->reap(k->launcher->self, 2000, why, sizeof why);
        }
        k->dead = true;
    }
    return 0;
}
