/* ag_mcp_shell: MCP's shell tool (see ag_mcp_tools_impl.h). One command
 * manager per call: calls on a box come one at a time, and destroying the
 * manager at the end kills whatever the command left in its process
 * group. */
#include "agent/mcp/ag_mcp_tools_impl.h"

#include "agent/loop/ag_render.h"
#include "agent/loop/ag_tools.h"
#include "common/buf.h"
#include "common/strv.h"
#include "common/xalloc.h"
#include "sandbox/sb_cmds.h"
#include "sandbox/sb_policy.h"
#include "sandbox/sb_sandbox.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHELL_OUTPUT ((size_t)1 << 20) /* bytes of output, then killed */
#define SHELL_TEXT ((size_t)64 * 1024) /* bytes of stdout in the text */
#define SHELL_PROGRESS 1000            /* progress lines per call */
#define SHELL_MAX_TIMEOUT_S 3600       /* with --timeout 0 */

extern char **environ;

/* Progress: whole lines of either stream, ANSI stripped, cut. */
typedef struct s_progress {
    const ag_mcp_call_t *call; /* borrowed, or NULL */
    buf_t pending[2];          /* a line not ended yet, per stream */
    size_t sent;               /* lines sent */
} s_progress_t;

static void
s_line(s_progress_t *p, const char *s, size_t n)
{
    if (!p->call || !p->call->progress || p->sent >= SHELL_PROGRESS || n == 0)
        return;
    char *line = xstrndup(s, n < 1000 ? n : 1000);
    p->call->progress(p->call->arg, ag_strip_ansi(line));
    free(line);
    p->sent++;
}

static void
s_feed(s_progress_t *p, int stream, const char *data, size_t len)
{
    buf_t *b = &p->pending[stream == 2];
    for (;;) {
        const char *nl = memchr(data, '\n', len);
        if (!nl) {
            if (b->len < 1000)
                buf_append(b, data, len < 1000 ? len : 1000);
            return;
        }
        size_t n = (size_t)(nl - data);
        if (b->len) {
            buf_append(b, data, n);
            s_line(p, b->data, b->len);
            buf_reset(b);
        } else {
            s_line(p, data, n);
        }
        data = nl + 1;
        len -= n + 1;
    }
}

/* The command line, checked; or NULL with an error result in *bad. */
static const char *
s_args(const json_t *args, int op_ms, int *timeout_ms, const char **cwd,
       json_t **bad)
{
    const char *cmd = json_string_value(json_object_get(args, "command"));
    if (!cmd || !*cmd) {
        *bad = ag_mcp_text_result(
            true, "error: shell needs {\"command\": \"...\"} with the "
                  "command line as a string; nothing was run");
        return NULL;
    }
    int bound = op_ms > 0 ? op_ms : SHELL_MAX_TIMEOUT_S * 1000;
    *timeout_ms = bound;
    json_t *t = json_object_get(args, "timeout");
    if (t) {
        double secs = json_number_value(t);
        if (!json_is_number(t) || secs <= 0 || secs > SHELL_MAX_TIMEOUT_S) {
            *bad = ag_mcp_text_result(
                true,
                "error: timeout must be a number of seconds above "
                "0 and at most %d; nothing was run",
                SHELL_MAX_TIMEOUT_S);
            return NULL;
        }
        if (secs * 1000 < bound)
            *timeout_ms = secs * 1000 < 1 ? 1 : (int)(secs * 1000);
    }
    json_t *c = json_object_get(args, "cwd");
    *cwd = c ? json_string_value(c) : SB_WORKSPACE_PATH;
    if (!*cwd || (*cwd)[0] != '/') {
        *bad = ag_mcp_text_result(
            true, "error: cwd must be an absolute path inside the "
                  "sandbox, such as /mnt/data or /tmp; nothing was run");
        return NULL;
    }
    return cmd;
}

/* A newline before the next part, unless the text ends with one. */
static const char *
s_sep(const buf_t *t)
{
    return t->len && t->data[t->len - 1] != '\n' ? "\n" : "";
}

static json_t *
s_result(const buf_t *out, const buf_t *err, const sb_cmd_end_t *end,
         bool stopped)
{
    char *o = ag_tools_truncate(buf_cstr(out), SHELL_TEXT);
    char *e = ag_tools_truncate(buf_cstr(err), SHELL_TEXT / 4);
    buf_t text;
    buf_init(&text, 0);
    buf_puts(&text, o);
    if (*e)
        buf_printf(&text, "%s[stderr]\n%s", s_sep(&text), e);
    if (stopped)
        buf_printf(&text, "%s[cancelled: the command was killed]",
                   s_sep(&text));
    else if (end->exit_code != 0 || end->timed_out || end->capped)
        buf_printf(&text, "%s[%s]", s_sep(&text), end->why);
    if (!text.len)
        buf_puts(&text, "[no output; exit status 0]");
    bool failed = stopped || end->exit_code != 0 || end->timed_out ||
                  end->capped || end->box_gone;
    json_t *r = json_pack("{s:[{s:s, s:s}], s:b, s:{s:i, s:s, s:s, s:b, s:b}}",
                          "content", "type", "text", "text", buf_cstr(&text),
                          "isError", failed, "structuredContent", "exit_code",
                          end->exit_code, "stdout", o, "stderr", e, "timed_out",
                          end->timed_out, "output_capped", end->capped);
    buf_release(&text);
    free(o);
    free(e);
    return r;
}

/* Run the call's command in `s`'s box (NULL with `why` when there is no
 * session); `op_timeout_ms` is the operator's (0 = none). */
static json_t *
s_shell(ag_session_t *s, const char *why, const sb_policy_t *pol,
        int op_timeout_ms, const json_t *args, const ag_mcp_call_t *call,
        bool *stopped)
{
    int timeout_ms;
    const char *cwd;
    json_t *bad = NULL;
    const char *cmd = s_args(args, op_timeout_ms, &timeout_ms, &cwd, &bad);
    if (!cmd)
        return bad;
    if (!s)
        return ag_mcp_text_result(true, "error: shell: no kernel session: %s",
                                  why ? why : "it did not start");
    err_t err = {0};
    sb_proc_engine_t *e = ag_session_proc_engine(s, &err);
    sb_cmds_limits_t lim = {.max_output = SHELL_OUTPUT,
                            .max_timeout_ms = timeout_ms};
    ag_session_audit_cmds(s, &lim);
    sb_cmds_t *m = e ? sb_cmds_new(&e, &lim, &err) : NULL;
    if (!m)
        return ag_mcp_text_result(true, "error: shell: %s", err.text);
    char **env = sb_policy_build_env(pol, environ, NULL);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    sb_cmd_opts_t o = {.argv = (char *const *)argv,
                       .envp = env,
                       .cwd = cwd,
                       .timeout_ms = timeout_ms};
    unsigned id;
    json_t *r = NULL;
    if (sb_cmds_start(m, &o, &id, NULL, &err) < 0) {
        r = ag_mcp_text_result(true, "error: shell: %s; nothing was run",
                               err.text);
        goto out;
    }
    buf_t outb, errb;
    buf_init(&outb, SHELL_OUTPUT);
    buf_init(&errb, SHELL_OUTPUT);
    s_progress_t pr = {.call = call};
    buf_init(&pr.pending[0], 0);
    buf_init(&pr.pending[1], 0);
    size_t cursor = 0;
    sb_cmd_end_t end;
    memset(&end, 0, sizeof end);
    bool cancel = false;
    for (;;) {
        int stream;
        char *data;
        size_t len;
        int got = sb_cmds_next(m, id, &cursor, 100, &stream, &data, &len, &end);
        if (got == SB_CMDS_DATA) {
            buf_append(stream == 2 ? &errb : &outb, data, len);
            s_feed(&pr, stream, data, len);
            free(data);
            continue;
        }
        if (got != SB_CMDS_WAIT)
            break;
        if (!cancel && call && call->should_stop &&
            call->should_stop(call->arg)) {
            cancel = true;
            sb_cmds_signal(m, id, SIGKILL, NULL);
        }
    }
    for (int i = 0; i < 2; i++) { /* a last line without its newline */
        s_line(&pr, pr.pending[i].data, pr.pending[i].len);
        buf_release(&pr.pending[i]);
    }
    r = s_result(&outb, &errb, &end, cancel);
    buf_release(&outb);
    buf_release(&errb);
    if (stopped)
        *stopped = cancel;
out:
    sb_cmds_destroy(&m);
    strv_free(env);
    return r;
}

json_t *
ag_mcp_tool_shell(ag_mcp_box_t *b, const json_t *args)
{
    err_t err = {0};
    ag_session_t *s = ag_mcp_box_session(b, &err);
    return s_shell(s, err.text, &b->cfg->session->policy,
                   b->cfg->session->timeout_ms, args, b->call, &b->stopped);
}
