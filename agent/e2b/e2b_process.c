/* e2b_process: envd's process.Process on the box's command machinery
 * (sandbox/sb_cmds.h). One command manager per sandbox (its slot state),
 * made at the first Start, remade when the kernel's box was respawned.
 *
 * Streams (Start, Connect): the handler starts or finds the command,
 * sends the start event and hands the stream to a detached producer
 * thread that follows the command's output log; the producer touches the
 * manager only between e2b_sandbox_enter and _leave, so the slot's end
 * hook (which destroys the manager and with it every command) never runs
 * under it. A client that goes away stops its stream, not the command (as
 * in envd: background commands are reconnected to with Connect).
 *
 * Bounds: a command's time is the client's Connect-Timeout-Ms (the SDK's
 * timeoutMs, 60 s by default; 0 = the sandbox's life); its output at most
 * E2B_PROCESS_MAX_OUTPUT bytes (or --max-output if smaller), past which
 * it is killed; SB_CMD_MAX alive per sandbox; all die with the sandbox. */
#include "agent/e2b/e2b_process.h"

#include "agent/e2b/e2b_connect.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_cmds.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"

#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define E2B_PROCESS_MAX_OUTPUT ((size_t)16 << 20)
#define FOLLOW_SLICE_MS 250

extern char **environ;

typedef struct s_state {
    pthread_mutex_t mu;
    sb_cmds_t *m; /* owned, or NULL until the first Start */
} s_state_t;

static void *
s_make(e2b_sandbox_t *sb)
{
    (void)sb;
    s_state_t *s = xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void
s_end(e2b_sandbox_t *sb, void *state)
{
    (void)sb;
    s_state_t *s = state;
    pthread_mutex_lock(&s->mu);
    sb_cmds_destroy(&s->m); /* kills every command still running */
    pthread_mutex_unlock(&s->mu);
}

static void
s_free(void *state)
{
    s_state_t *s = state;
    sb_cmds_destroy(&s->m);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static s_state_t *
s_state(e2b_sandbox_t *sb)
{
    return e2b_sandbox_slot(sb, E2B_SLOT_PROCESS, s_make, s_end, s_free);
}

/* Between enter and leave: the sandbox's manager (borrowed), made or
 * remade for the box running now; NULL + err. */
static sb_cmds_t *
s_manager(e2b_sandbox_t *sb, err_t *err)
{
    s_state_t *s = s_state(sb);
    pthread_mutex_lock(&s->mu);
    if (s->m && !sb_cmds_alive(s->m))
        sb_cmds_destroy(&s->m); /* the kernel was restarted: a new box */
    if (!s->m) {
        sb_proc_engine_t *e =
            ag_session_proc_engine(e2b_sandbox_session(sb), err);
        size_t cap = e2b_sandbox_max_output(sb);
        sb_cmds_limits_t lim = {.max_output =
                                    cap && cap < E2B_PROCESS_MAX_OUTPUT
                                        ? cap
                                        : E2B_PROCESS_MAX_OUTPUT};
        ag_session_audit_cmds(e2b_sandbox_session(sb), &lim);
        if (e)
            s->m = sb_cmds_new(&e, &lim, err);
    }
    sb_cmds_t *m = s->m;
    pthread_mutex_unlock(&s->mu);
    return m;
}

/* ---- messages ---------------------------------------------------------- */

static json_t *
s_event(const char *kind, json_t *value)
{
    return json_pack("{s:{s:o}}", "event", kind, value);
}

static json_t *
s_data_event(int stream, const char *data, size_t len)
{
    size_t b64 = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
    char *enc = xmalloc(b64);
    sodium_bin2base64(enc, b64, (const unsigned char *)data, len,
                      sodium_base64_VARIANT_ORIGINAL);
    const char *key = stream == SB_CMDS_PTY ? "pty"
                      : stream == 2         ? "stderr"
                                            : "stdout";
    json_t *ev = s_event("data", json_pack("{s:s}", key, enc));
    free(enc);
    return ev;
}

static json_t *
s_end_event(const sb_cmd_end_t *end)
{
    char status[200];
    if (end->signal)
        snprintf(status, sizeof status, "signal: %s", strsignal(end->signal));
    else
        snprintf(status, sizeof status, "exit status %d", end->exit_code);
    json_t *v = json_pack("{s:i, s:b, s:s}", "exitCode", end->exit_code,
                          "exited", end->signal == 0, "status", status);
    if (end->timed_out || end->capped || end->box_gone)
        json_object_set_new(v, "error", json_string(end->why));
    return s_event("end", v);
}

/* The command msg's process selector names: its id, or 0 + err. */
static unsigned
s_find(sb_cmds_t *m, const json_t *msg, err_t *err)
{
    const json_t *sel =
        json_object_get(json_object_get(msg, "process"), "selector");
    if (!sel) /* protobuf JSON: the oneof's field sits in the message */
        sel = json_object_get(msg, "process");
    json_t *pid = json_object_get(sel, "pid");
    const char *tag = json_string_value(json_object_get(sel, "tag"));
    unsigned id = 0;
    if (json_is_integer(pid) || tag)
        id = sb_cmds_find(m, (int)json_integer_value(pid), tag);
    if (!id && tag)
        err_set(err, ERR_USAGE, "process with tag %.200s not found", tag);
    else if (!id)
        err_set(err, ERR_USAGE, "process with pid %lld not found",
                (long long)json_integer_value(pid));
    return id;
}

/* The selector's command: its id, or 0 after answering not_found. */
static unsigned
s_select(e2b_req_t *r, sb_cmds_t *m, const json_t *msg)
{
    err_t err = {0};
    unsigned id = s_find(m, msg, &err);
    if (!id)
        e2b_connect_error(r, "not_found", "%s", err.text);
    return id;
}

static bool
s_running(sb_cmds_t *m, unsigned id)
{
    json_t *l = sb_cmds_list(m);
    size_t i;
    json_t *v;
    bool yes = false;
    json_array_foreach(l, i, v)
    {
        if (json_integer_value(json_object_get(v, "id")) == (json_int_t)id)
            yes = true;
    }
    json_decref(l);
    return yes;
}

/* ---- following a command into a stream --------------------------------- */

typedef struct s_follow {
    e2b_sandbox_t *sb;     /* borrowed through entry */
    ag_reg_entry_t *entry; /* a reference of our own */
    e2b_stream_t *st;      /* the producer's reference */
    unsigned id;           /* the command */
    size_t cursor;         /* where in its log */
    int keepalive_ms;      /* the client's ping interval, or 0 */
} s_follow_t;

static void *
s_follow_thread(void *arg)
{
    s_follow_t *f = arg;
    int64_t last = clock_mono_ms();
    const char *why = NULL;
    for (;;) {
        if (e2b_stream_gone(f->st))
            break; /* the client left; the command goes on */
        if (!e2b_sandbox_enter(f->sb)) {
            why = "the sandbox ended";
            break;
        }
        err_t err = {0};
        sb_cmds_t *m = s_manager(f->sb, &err);
        int stream = 0, got = SB_CMDS_UNKNOWN;
        char *data = NULL;
        size_t len = 0;
        sb_cmd_end_t end;
        if (m)
            got = sb_cmds_next(m, f->id, &f->cursor, FOLLOW_SLICE_MS, &stream,
                               &data, &len, &end);
        e2b_sandbox_leave(f->sb);
        if (got == SB_CMDS_DATA) {
            json_t *ev = s_data_event(stream, data, len);
            e2b_connect_stream_send(f->st, ev);
            json_decref(ev);
            free(data);
            last = clock_mono_ms();
        } else if (got == SB_CMDS_END) {
            json_t *ev = s_end_event(&end);
            e2b_connect_stream_send(f->st, ev);
            json_decref(ev);
            break;
        } else if (got == SB_CMDS_UNKNOWN) {
            why = "the process is gone (the kernel was restarted?)";
            break;
        } else if (f->keepalive_ms > 0 &&
                   clock_mono_ms() - last >= f->keepalive_ms) {
            json_t *ev = s_event("keepalive", json_object());
            e2b_connect_stream_send(f->st, ev);
            json_decref(ev);
            last = clock_mono_ms();
        }
    }
    e2b_connect_stream_end(&f->st, why ? "unavailable" : NULL, why);
    ag_reg_unref(&f->entry);
    free(f);
    return NULL;
}

static void
s_follow_start(e2b_req_t *r, e2b_sandbox_t *sb, e2b_stream_t *st, unsigned id,
               size_t cursor)
{
    s_follow_t *f = xcalloc(1, sizeof *f);
    f->sb = sb;
    f->entry = ag_reg_ref(e2b_sandbox_entry(sb));
    f->st = st;
    f->id = id;
    f->cursor = cursor;
    const char *ka = e2b_req_header(r, "Keepalive-Ping-Interval");
    int secs = ka ? atoi(ka) : 0;
    f->keepalive_ms = secs > 0 && secs <= 3600 ? secs * 1000 : 0;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (pthread_create(&t, &at, s_follow_thread, f) != 0) {
        e2b_connect_stream_end(&f->st, "resource_exhausted",
                               "cannot start a thread for the stream");
        ag_reg_unref(&f->entry);
        free(f);
    }
    pthread_attr_destroy(&at);
}

/* ---- the methods -------------------------------------------------------- */

/* base env < the sandbox's envVars < the command's envs; names checked. */
static char **
s_env(e2b_sandbox_t *sb, const json_t *envs, err_t *err)
{
    char **base = sb_policy_build_env(e2b_sandbox_policy(sb), environ, NULL);
    json_t *all = json_object();
    for (char **e = base; *e; e++) {
        char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        *eq = '\0';
        json_object_set_new(all, *e, json_string(eq + 1));
    }
    strv_free(base);
    const json_t *layers[2] = {e2b_sandbox_env(sb), envs};
    for (int i = 0; i < 2; i++) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)layers[i], k, v)
        {
            if (!json_is_string(v) || !*k || strchr(k, '=')) {
                err_set(err, ERR_USAGE,
                        "envs: '%s' must be a name without '=' with a "
                        "string value",
                        k);
                json_decref(all);
                return NULL;
            }
            json_object_set(all, k, v);
        }
    }
    char **out = NULL;
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(all, k, v)
    {
        strv_push(&out, &n, xasprintf("%s=%s", k, json_string_value(v)));
    }
    json_decref(all);
    if (!out)
        strv_push(&out, &n, xstrdup("PATH=/usr/local/bin:/usr/bin:/bin"));
    return out;
}

static void
s_start(e2b_req_t *r, e2b_sandbox_t *sb, sb_cmds_t *m, const json_t *msg)
{
    const json_t *p = json_object_get(msg, "process");
    const char *cmd = json_string_value(json_object_get(p, "cmd"));
    const json_t *size = json_object_get(json_object_get(msg, "pty"), "size");
    json_int_t cols = json_integer_value(json_object_get(size, "cols"));
    json_int_t rows = json_integer_value(json_object_get(size, "rows"));
    if (json_object_get(msg, "pty") &&
        (cols < 1 || cols > 1000 || rows < 1 || rows > 1000)) {
        e2b_connect_error(r, "invalid_argument",
                          "pty.size needs cols and rows from 1 to 1000");
        return;
    }
    if (!cmd || !*cmd) {
        e2b_connect_error(r, "invalid_argument", "process.cmd is required");
        return;
    }
    char **argv = NULL;
    size_t n = 0;
    strv_push(&argv, &n, xstrdup(cmd));
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(p, "args"), i, a)
    {
        if (json_is_string(a))
            strv_push(&argv, &n, xstrdup(json_string_value(a)));
    }
    err_t err = {0};
    char **env = s_env(sb, json_object_get(p, "envs"), &err);
    const char *cwd = json_string_value(json_object_get(p, "cwd"));
    const char *to = e2b_req_header(r, "Connect-Timeout-Ms");
    long long t = to ? atoll(to) : 0;
    sb_cmd_opts_t o = {
        .argv = argv,
        .envp = env,
        .cwd = cwd && *cwd ? cwd : E2B_HOME,
        .tag = json_string_value(json_object_get(msg, "tag")),
        .timeout_ms = t > 0 && t < 86400000 ? (int)t : 0,
        .stdin_open = json_is_true(json_object_get(msg, "stdin")),
        .pty_cols = (unsigned short)cols,
        .pty_rows = (unsigned short)rows,
    };
    unsigned id;
    int pid;
    if (!env || sb_cmds_start(m, &o, &id, &pid, &err) < 0) {
        e2b_connect_error(
            r, err.code == ERR_USAGE ? "invalid_argument" : "internal", "%s",
            err.text);
        goto out;
    }
    e2b_stream_t *st = e2b_connect_stream_open(r);
    if (!st) {
        sb_cmds_signal(m, id, SIGKILL, NULL); /* nobody will see it */
        goto out;
    }
    json_t *ev = s_event("start", json_pack("{s:i}", "pid", pid));
    e2b_connect_stream_send(st, ev);
    json_decref(ev);
    s_follow_start(r, sb, st, id, 0);
out:
    strv_free(argv);
    strv_free(env);
}

static void
s_connect(e2b_req_t *r, e2b_sandbox_t *sb, sb_cmds_t *m, const json_t *msg)
{
    unsigned id = s_select(r, m, msg);
    if (!id)
        return;
    json_t *l = sb_cmds_list(m);
    int pid = -1;
    size_t i;
    json_t *v;
    json_array_foreach(l, i, v)
    {
        if (json_integer_value(json_object_get(v, "id")) == (json_int_t)id)
            pid = (int)json_integer_value(json_object_get(v, "pid"));
    }
    json_decref(l);
    if (pid < 0) {
        e2b_connect_error(r, "not_found", "the process has ended");
        return;
    }
    size_t cursor = sb_cmds_cursor_now(m, id); /* from now on, as envd */
    e2b_stream_t *st = e2b_connect_stream_open(r);
    if (!st)
        return;
    json_t *ev = s_event("start", json_pack("{s:i}", "pid", pid));
    e2b_connect_stream_send(st, ev);
    json_decref(ev);
    s_follow_start(r, sb, st, id, cursor);
}

static void
s_list(e2b_req_t *r, sb_cmds_t *m)
{
    json_t *l = sb_cmds_list(m), *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(l, i, v)
    {
        json_t *argv = json_object_get(v, "argv");
        json_t *args = json_array();
        for (size_t k = 1; k < json_array_size(argv); k++)
            json_array_append(args, json_array_get(argv, k));
        json_t *cfg =
            json_pack("{s:O, s:o, s:{}, s:O}", "cmd", json_array_get(argv, 0),
                      "args", args, "envs", "cwd", json_object_get(v, "cwd"));
        json_t *info = json_pack("{s:o, s:O}", "config", cfg, "pid",
                                 json_object_get(v, "pid"));
        if (json_is_string(json_object_get(v, "tag")))
            json_object_set(info, "tag", json_object_get(v, "tag"));
        json_array_append_new(out, info);
    }
    json_decref(l);
    e2b_connect_reply(r, json_pack("{s:o}", "processes", out));
}

static int
s_signal_of(const json_t *s)
{
    if (json_is_integer(s))
        return (int)json_integer_value(s);
    const char *n = json_string_value(s);
    if (n && strcmp(n, "SIGNAL_SIGKILL") == 0)
        return SIGKILL;
    if (n && strcmp(n, "SIGNAL_SIGTERM") == 0)
        return SIGTERM;
    return 0;
}

/* Write a ProcessInput ({"stdin" or "pty": base64}) to command `id`.
 * 0, or -1 + err and *code (the Connect error code). */
static int
s_input(sb_cmds_t *m, unsigned id, const json_t *in, const char **code,
        err_t *err)
{
    const char *b64 = json_string_value(json_object_get(in, "stdin"));
    if (!b64)
        b64 = json_string_value(json_object_get(in, "pty"));
    *code = "invalid_argument";
    if (!b64)
        return err_set(err, ERR_USAGE,
                       "input needs stdin or pty (base64 bytes)");
    size_t cap = strlen(b64) / 4 * 3 + 3, len = 0;
    unsigned char *bin = xmalloc(cap);
    if (sodium_base642bin(bin, cap, b64, strlen(b64), "\r\n", &len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) < 0) {
        free(bin);
        return err_set(err, ERR_USAGE, "stdin is not base64");
    }
    *code = "failed_precondition";
    int rc = sb_cmds_write(m, id, bin, len, err);
    free(bin);
    return rc < 0 ? -1 : 0;
}

int
e2b_process_stream_input(e2b_sandbox_t *sb, const json_t *msg, unsigned *id,
                         const char **code, err_t *err)
{
    const json_t *start = json_object_get(msg, "start");
    const json_t *data = json_object_get(msg, "data");
    if (!start && !data)
        return 0; /* a keepalive */
    *code = "invalid_argument";
    if (start && *id)
        return err_set(err, ERR_USAGE, "the stream has one start message");
    if (data && !*id)
        return err_set(err, ERR_USAGE,
                       "the stream's first message must be start, naming "
                       "the process");
    *code = "unavailable";
    if (!e2b_sandbox_enter(sb))
        return err_set(err, ERR_IO, "the sandbox is ending");
    int rc = -1;
    sb_cmds_t *m = s_manager(sb, err);
    if (m && start) {
        *id = s_find(m, start, err);
        *code = "not_found";
        rc = *id ? 0 : -1;
    } else if (m) {
        rc = s_input(m, *id, json_object_get(data, "input"), code, err);
    }
    e2b_sandbox_leave(sb);
    return rc;
}

static void
s_unary(e2b_req_t *r, sb_cmds_t *m, const char *method, const json_t *msg)
{
    unsigned id = s_select(r, m, msg);
    if (!id)
        return;
    err_t err = {0};
    int rc = 0;
    if (strcmp(method, "SendSignal") == 0) {
        int sig = s_signal_of(json_object_get(msg, "signal"));
        if (sig != SIGKILL && sig != SIGTERM) {
            e2b_connect_error(r, "invalid_argument",
                              "signal must be SIGNAL_SIGTERM or "
                              "SIGNAL_SIGKILL");
            return;
        }
        if (!s_running(m, id)) {
            e2b_connect_error(r, "not_found", "the process has ended");
            return;
        }
        rc = sb_cmds_signal(m, id, sig, &err);
    } else if (strcmp(method, "Update") == 0) {
        const json_t *size =
            json_object_get(json_object_get(msg, "pty"), "size");
        json_int_t cols = json_integer_value(json_object_get(size, "cols"));
        json_int_t rows = json_integer_value(json_object_get(size, "rows"));
        if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000) {
            e2b_connect_error(r, "invalid_argument",
                              "pty.size needs cols and rows from 1 to 1000");
            return;
        }
        rc = sb_cmds_resize(m, id, (unsigned short)cols, (unsigned short)rows,
                            &err);
    } else if (strcmp(method, "SendInput") == 0) {
        const char *code = NULL;
        if (s_input(m, id, json_object_get(msg, "input"), &code, &err) < 0) {
            e2b_connect_error(r, code, "%s", err.text);
            return;
        }
    } else { /* CloseStdin */
        rc = sb_cmds_close_stdin(m, id, &err);
    }
    if (rc < 0)
        e2b_connect_error(r, "failed_precondition", "%s", err.text);
    else
        e2b_connect_reply(r, json_object());
}

void
e2b_process_handle(e2b_req_t *r, e2b_sandbox_t *sb, const char *method)
{
    static const char *const known[] = {"Start",     "Connect",    "List",
                                        "SendInput", "SendSignal", "CloseStdin",
                                        "Update"};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok = ok || strcmp(method, known[i]) == 0;
    if (!ok) {
        e2b_connect_error(r, "unimplemented",
                          "process.Process/%.40s is not supported; Start "
                          "(with or without a pty), Connect, List, "
                          "SendInput, StreamInput (POST, "
                          "application/connect+json), SendSignal, "
                          "CloseStdin and Update are",
                          method);
        return;
    }
    json_t *msg = e2b_connect_request(r);
    if (!msg)
        return;
    if (!e2b_sandbox_enter(sb)) {
        json_decref(msg);
        e2b_connect_error(r, "unavailable", "the sandbox is ending");
        return;
    }
    err_t err = {0};
    sb_cmds_t *m = s_manager(sb, &err);
    if (!m)
        e2b_connect_error(r, "unavailable", "%s", err.text);
    else if (strcmp(method, "Start") == 0)
        s_start(r, sb, m, msg);
    else if (strcmp(method, "Connect") == 0)
        s_connect(r, sb, m, msg);
    else if (strcmp(method, "List") == 0)
        s_list(r, m);
    else
        s_unary(r, m, method, msg);
    e2b_sandbox_leave(sb);
    json_decref(msg);
}
