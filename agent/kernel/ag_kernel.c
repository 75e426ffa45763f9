#include "agent/kernel/ag_kernel.h"
#include "agent/kernel/ag_kernel_impl.h"
#include "agent/loop/ag_markdown.h"

#include "agent/llm/ag_provider.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/jget.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_conn.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/kb_server.h"
#include "notebook-io/nb_notebook.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef JUPYTER_AGENT_VERSION
#include "common/version.h"
#endif

/* ---- small helpers ---- */

static bool
s_blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
            return false;
    return true;
}

static bool
s_reset_cell(const char *code)
{
    while (*code == ' ' || *code == '\t' || *code == '\r' || *code == '\n')
        code++;
    size_t n = strlen(AG_KERNEL_MAGIC_RESET);
    return strncmp(code, AG_KERNEL_MAGIC_RESET, n) == 0 && s_blank(code + n);
}

/* A cell that is only exit or quit (as IPython has them): the frontend is
 * asked to leave, as IPython kernels do, instead of asking the model. */
static bool
s_exit_cell(const char *code)
{
    static const char *const words[] = {"exit", "quit", "exit()", "quit()"};
    while (*code == ' ' || *code == '\t' || *code == '\r' || *code == '\n')
        code++;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i]);
        if (strncmp(code, words[i], n) == 0 && s_blank(code + n))
            return true;
    }
    return false;
}

nb_record_t *
ag_kernel_record(ag_kernel_t *k)
{
    return k->record;
}

/* ---- forwarding the inner kernel's outputs (kb_exec_hooks) ---- */

/* IPython's tracebacks name the cell "In[n]" by the inner kernel's count;
 * the frontend numbered it `ours`. Rewrite every "In[inner]" in
 * content.traceback. */
static void
s_renumber_traceback(json_t *content, int inner, int ours)
{
    json_t *tb = json_object_get(content, "traceback"), *line;
    size_t i;
    if (inner < 0 || inner == ours || !json_is_array(tb))
        return;
    /* IPython 8.5 writes "In [n]", later versions "In[n]". */
    for (int form = 0; form < 2; form++) {
        char from[32], to[32];
        snprintf(from, sizeof from, form ? "In [%d]" : "In[%d]", inner);
        snprintf(to, sizeof to, form ? "In [%d]" : "In[%d]", ours);
        json_array_foreach(tb, i, line)
        {
            const char *s = json_string_value(line);
            if (!s || !strstr(s, from))
                continue;
            buf_t b;
            buf_init(&b, 0);
            for (const char *hit; (hit = strstr(s, from));
                 s = hit + strlen(from)) {
                buf_append(&b, s, (size_t)(hit - s));
                buf_puts(&b, to);
            }
            buf_puts(&b, s);
            json_array_set_new(tb, i, json_string(buf_cstr(&b)));
            buf_release(&b);
        }
    }
}

static void
s_forward(const kb_msg_t *msg, void *arg)
{
    fwd_t *f = arg;
    ag_kernel_t *k = f->k;
    static const char *const types[] = {
        "stream",       "display_data", "update_display_data",
        "clear_output", "error",        "execute_result",
        "comm_open",    "comm_msg",     "comm_close"};
    const char *type = kb_msg_type(msg);
    bool known = false;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        known = known || strcmp(type, types[i]) == 0;
    if (!known)
        return;
    json_t *content = json_deep_copy(kb_msg_content(msg));
    if (strcmp(type, "execute_result") == 0) {
        if (f->mode == FWD_CELL) {
            json_object_set_new(content, "execution_count",
                                json_integer(k->cell_count));
            json_t *plain =
                json_object_get(json_object_get(content, "data"), "text/plain");
            if (json_is_string(plain)) {
                json_decref(k->cell_result);
                k->cell_result = json_incref(plain);
            }
        } else {
            json_object_del(content, "execution_count");
            type = "display_data";
        }
    }
    if (strcmp(type, "error") == 0 && f->mode == FWD_CELL) {
        s_renumber_traceback(content, kb_output_execution_count(f->out),
                             k->cell_count);
        ag_kernel_set_cell_error(k, content);
    }
    kb_server_publish(k->server, k->cell, type, content, NULL);
}

static bool
s_should_stop(void *arg)
{
    fwd_t *f = arg;
    return ag_kernel_should_stop(f->k);
}

static char *
s_on_input(const char *prompt, bool password, void *arg)
{
    fwd_t *f = arg;
    ag_kernel_t *k = f->k;
    err_t err = {0};
    char *value = ag_kernel_input(k, prompt, password, &err);
    if (!value && err.code == ERR_INTERRUPTED && k->session) {
        /* Interrupt the inner input() before it sees our empty answer, so
         * it raises KeyboardInterrupt as a local input() would. Only by
         * signal: a message would need the client we are inside of. */
        kb_kernel_t *inner = ag_session_kernel(k->session);
        const kb_kernelspec_t *spec = kb_kernel_spec(inner);
        if (spec && (!spec->interrupt_mode ||
                     strcmp(spec->interrupt_mode, "message") != 0)) {
            err_t ierr;
            kb_kernel_interrupt(inner, &ierr);
        }
    }
    return value;
}

/* The last error output in `out`, borrowed, or NULL. */
static json_t *
s_last_error(kb_output_t *out)
{
    json_t *outputs = kb_output_outputs(out), *found = NULL, *o;
    size_t i;
    json_array_foreach(outputs, i, o) if (strcmp(jget_str(o, "output_type", ""),
                                                 "error") == 0) found = o;
    return found;
}

/* Run code in the inner kernel, forwarding as `mode` says. */
static int
s_run_inner(ag_kernel_t *k, const char *code, fwd_mode_t mode, kb_output_t *out,
            err_t *err)
{
    ag_session_t *session = ag_kernel_session(k, err);
    if (!session)
        return -1;
    if (ag_kernel_should_stop(k)) /* interrupted while the session started */
        return err_set(err, ERR_INTERRUPTED, "interrupted before it ran");
    json_t *req = k->cell ? kb_msg_content(k->cell) : NULL;
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.allow_stdin = k->cell_allow_stdin;
    if (mode == FWD_CELL) {
        xo.silent = jget_bool(req, "silent", false);
        xo.store_history = jget_bool(req, "store_history", true);
        json_t *ue = json_object_get(req, "user_expressions");
        xo.user_expressions = json_is_object(ue) ? ue : NULL;
    }
    /* We run one execution at a time, so the inner kernel never has a
     * queue worth aborting; but its abort window after an error (ipykernel
     * 6) would swallow our next cell. stop_on_error is applied to OUR
     * queue instead (kb_server_abort_queued). */
    xo.stop_on_error = false;
    fwd_t f = {k, mode, out};
    kb_exec_hooks_t hooks = {.on_iopub = s_forward,
                             .on_input = s_on_input,
                             .should_stop = s_should_stop,
                             .arg = &f};
    int rc = kb_kernel_execute(ag_session_kernel(session), code, &xo,
                               k->inner->timeout_ms, out, &hooks, err);
    if (rc && err && err->code == ERR_KERNEL) {
        err_prefix(err, "the Python session died");
        size_t used = strlen(err->text);
        snprintf(err->text + used, sizeof err->text - used,
                 "; a fresh session starts with the next cell (its variables "
                 "are gone)");
        ag_session_destroy(&k->session);
    }
    return rc;
}

int
ag_kernel_run_python(ag_kernel_t *k, const char *code, kb_output_t *out,
                     err_t *err)
{
    return s_run_inner(k, code, FWD_TOOL, out, err);
}

/* ---- execute_request ---- */

/* user_expressions of a cell that did not run in the inner kernel (the
 * agent answered it): the inner kernel evaluates them, as ipykernel would
 * after any cell, in a silent execution that leaves no trace. */
static void
s_eval_user_expressions(ag_kernel_t *k, json_t *expressions)
{
    err_t err = {0};
    ag_session_t *session = ag_kernel_session(k, &err);
    if (!session) {
        log_warn("user_expressions: %s", err.text);
        return;
    }
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    xo.stop_on_error = false;
    xo.user_expressions = expressions;
    kb_output_t *out = kb_output_new(NULL, k->inner->max_output_bytes);
    if (kb_kernel_execute(ag_session_kernel(session), "", &xo, INNER_REQUEST_MS,
                          out, NULL, &err) == 0)
        k->cell_user_expressions =
            json_deep_copy(kb_output_user_expressions(out));
    else
        log_warn("user_expressions: %s", err.text);
    kb_output_destroy(&out);
}

/* A plain cell: the agent answers it. */
static void
s_run_ask(ag_kernel_t *k, const char *code)
{
    err_t err = {0};
    if (k->ask(k, code, &err) != 0 && !k->cell_error) {
        if (!err.text[0])
            err_set(&err, ERR_PROVIDER, "the agent could not answer");
        ag_kernel_error(k, ag_kernel_ename(err.code), err.text);
    }
}

static void
s_run_python_cell(ag_kernel_t *k, const char *body)
{
    err_t err = {0};
    char start[40], end[40];
    kb_output_t *out = kb_output_new(NULL, k->inner->max_output_bytes);
    kb_output_merge_streams(out, true); /* read as text, whole */
    clock_iso8601_now(start, sizeof start);
    int rc = s_run_inner(k, body, FWD_CELL, out, &err);
    clock_iso8601_now(end, sizeof end);
    /* Pager pages (print?), set_next_input ... reach the frontend as the
     * inner kernel sent them. */
    if (json_array_size(kb_output_payload(out))) {
        json_decref(k->cell_payload);
        k->cell_payload = json_deep_copy(kb_output_payload(out));
    }
    json_decref(k->cell_user_expressions);
    k->cell_user_expressions = json_deep_copy(kb_output_user_expressions(out));
    /* The recorder keeps the outputs array itself (a reference). */
    nb_record_add_code(k->record, body, kb_output_outputs(out),
                       kb_output_execution_count(out), start, end);
    if (rc == 0) {
        if (!k->cell_error && strcmp(kb_output_status(out), "ok") != 0) {
            json_t *e = s_last_error(out);
            if (e)
                ag_kernel_set_cell_error(k, e);
            else
                ag_kernel_error(k, "ExecutionAborted",
                                "the Python session did not run this cell");
        }
    } else if (!k->cell_error) {
        ag_kernel_error(k, ag_kernel_ename(err.code), err.text);
    } else if (err.code != ERR_INTERRUPTED) {
        /* Its own error came through; say what else happened. */
        char *note = xasprintf("jupyter-agent: %s\n", err.text);
        kb_server_stream(k->server, k->cell, "stderr", note);
        free(note);
    }
    kb_output_destroy(&out);
}

static void
s_run_reset(ag_kernel_t *k)
{
    err_t err = {0};
    ag_kernel_set_ask_state(k, NULL, NULL);
    /* As MCP's reset: a new Python process in the same box, so files in
     * /mnt/data (uploads, results) stay; only when that fails does a new
     * session (and an empty /mnt/data) take its place. */
    bool lost = false;
    if (k->session && kb_kernel_restart(ag_session_kernel(k->session), &err)) {
        log_warn("%%reset: restarting the Python session failed (%s); "
                 "starting a new one",
                 err.text);
        ag_session_destroy(&k->session);
        lost = true;
    }
    err = (err_t){0};
    if (!ag_kernel_session(k, &err)) {
        ag_kernel_error(k, ag_kernel_ename(err.code), err.text);
        return;
    }
    const char *where = k->inner->gateway_url && *k->inner->gateway_url
                            ? "the kernel's directory"
                            : "/mnt/data";
    char *msg =
        lost ? xasprintf("Started a new Python session (restarting the old "
                         "one failed): variables, imports, the agent's "
                         "conversation and files in %s are gone.\n",
                         where)
             : xasprintf("Started a fresh Python session: variables, "
                         "imports and the agent's conversation are gone; "
                         "files in %s were kept.\n",
                         where);
    kb_server_stream(k->server, k->cell, "stdout", msg);
    free(msg);
}

/* A one-line magic cell "%name ARG": true, with the trimmed argument in
 * *arg (caller frees), when the cell is exactly that. */
static bool
s_line_magic(const char *code, const char *name, char **arg)
{
    while (*code == ' ' || *code == '\t' || *code == '\r' || *code == '\n')
        code++;
    size_t n = strlen(name);
    if (strncmp(code, name, n) != 0 ||
        (code[n] && code[n] != ' ' && code[n] != '\t' && code[n] != '\n' &&
         code[n] != '\r'))
        return false;
    const char *a = code + n;
    while (*a == ' ' || *a == '\t')
        a++;
    size_t len = strcspn(a, "\r\n");
    if (!s_blank(a + len))
        return false; /* more lines follow: not a line magic */
    while (len && (a[len - 1] == ' ' || a[len - 1] == '\t'))
        len--;
    *arg = xstrndup(a, len);
    return true;
}

static int
s_on_execute(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    ag_kernel_t *k = arg;
    json_t *content = kb_msg_content(req);
    const char *code = jget_str(content, "code", NULL);
    if (!code)
        return kb_server_reply(
            s, ch, req, "execute_reply",
            json_pack("{s:s, s:s, s:s, s:[s], s:i}", "status", "error", "ename",
                      "ProtocolError", "evalue", "execute_request without code",
                      "traceback", "execute_request without code",
                      "execution_count", k->execution_count),
            NULL);
    bool silent = jget_bool(content, "silent", false);
    bool store_history = jget_bool(content, "store_history", true) && !silent;
    k->cell = req;
    k->cell_silent = silent;
    k->cell_allow_stdin = jget_bool(content, "allow_stdin", true);
    k->cell_answered = false;
    json_decref(k->cell_error);
    json_decref(k->cell_result);
    json_decref(k->cell_payload);
    json_decref(k->cell_user_expressions);
    k->cell_error = k->cell_result = k->cell_payload = NULL;
    k->cell_user_expressions = NULL;
    /* As ipykernel: execute_input shows the number this cell would get;
     * only a cell that stores history keeps it (IPython's run_cell), so
     * store_history=False leaves the next cell's number as it was. */
    k->cell_count = k->execution_count + 1;
    if (!silent)
        kb_server_publish(s, req, "execute_input",
                          json_pack("{s:s, s:i}", "code", code,
                                    "execution_count", k->cell_count),
                          NULL);

    const char *body = NULL;
    char *magic_arg = NULL;
    bool exiting = false;
    if (ag_kernel_python_cell(code, &body))
        s_run_python_cell(k, body);
    else if (s_reset_cell(code))
        s_run_reset(k);
    else if (s_line_magic(code, AG_KERNEL_MAGIC_EXPORT, &magic_arg))
        ag_kernel_export(k, magic_arg);
    else if (s_line_magic(code, AG_KERNEL_MAGIC_MODEL, &magic_arg))
        ag_kernel_model_magic(k, magic_arg);
    else if (s_line_magic(code, AG_KERNEL_MAGIC_UPLOAD, &magic_arg))
        ag_kernel_upload(k, magic_arg);
    else if (s_line_magic(code, AG_KERNEL_MAGIC_DOWNLOAD, &magic_arg))
        ag_kernel_download(k, magic_arg);
    else if (s_exit_cell(code))
        exiting = true;
    else if (!s_blank(code))
        s_run_ask(k, code);
    free(magic_arg);

    /* Abort what was queued behind a failed cell before the client can
     * see the failure, so nothing it sends afterwards is aborted. */
    if (k->cell_error && jget_bool(content, "stop_on_error", true))
        kb_server_abort_queued(s);
    json_t *reply;
    if (k->cell_error) {
        reply = json_deep_copy(k->cell_error);
        json_object_set_new(reply, "status", json_string("error"));
    } else {
        reply = json_pack("{s:s, s:[], s:{}}", "status", "ok", "payload",
                          "user_expressions");
        json_t *ue = json_object_get(content, "user_expressions");
        if (!k->cell_user_expressions && json_object_size(ue))
            s_eval_user_expressions(k, ue);
        if (k->cell_user_expressions)
            json_object_set(reply, "user_expressions",
                            k->cell_user_expressions);
        if (k->cell_payload)
            json_array_extend(json_object_get(reply, "payload"),
                              k->cell_payload);
        if (exiting) /* jupyter console leaves; Lab and Notebook ignore it */
            json_array_append_new(
                json_object_get(reply, "payload"),
                json_pack("{s:s, s:b}", "source", "ask_exit", "keepkernel", 0));
    }
    if (store_history)
        k->execution_count = k->cell_count;
    json_object_set_new(reply, "execution_count",
                        json_integer(k->execution_count));
    int rc = kb_server_reply(s, ch, req, "execute_reply", reply, NULL);
    if (k->session) /* a cell just used it: idle time starts now */
        k->session_used_ms = clock_mono_ms();
    if (store_history)
        ag_kernel_history_add(k, code);
    k->cell = NULL;
    return rc;
}

static json_t *
s_kernel_info(const ag_kernel_opts_t *o)
{
    const char *sandbox =
        o->inner && o->inner->gateway_url && *o->inner->gateway_url
            ? "Python runs on a Jupyter server (its isolation is the "
              "server's), in a directory of its own there.\n"
        : o->inner && o->inner->no_sandbox
            ? "WARNING: --no-sandbox: Python runs as a plain process with "
              "your user's full access to files and network.\n"
            : "Python runs in a sandbox: no network, /mnt/data for files.\n";
    char *banner = xasprintf(
        "jupyter-agent %s: ask in plain language, and the agent answers, "
        "running Python when it needs to.\n"
        "Start a cell with %%%%python to run Python yourself; %%reset starts "
        "a fresh session.\n%s",
        JUPYTER_AGENT_VERSION, sandbox);
    json_t *info = json_pack(
        "{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:b, "
        "s:[{s:s, s:s}]}",
        "status", "ok", "protocol_version", KB_PROTOCOL_VERSION,
        "implementation", "jupyter-agent", "implementation_version",
        JUPYTER_AGENT_VERSION, "language_info", "name", AG_KERNEL_LANGUAGE,
        "version", "", "mimetype", "text/markdown", "file_extension", ".md",
        "pygments_lexer", "markdown", "codemirror_mode", "markdown", "banner",
        banner, "debugger", 0, "help_links", "text", "Python documentation",
        "url", "https://docs.python.org/3/");
    free(banner);
    return info;
}

/* ---- life cycle ---- */

ag_kernel_t *
ag_kernel_new(const ag_kernel_opts_t *o, err_t *err)
{
    assert(o->ask != NULL);
    kb_conn_t conn;
    if (kb_conn_load(&conn, o->connection_file, err))
        return NULL;
    kb_server_opts_t sopts = {.allow_unsigned = o->allow_unsigned,
                              .username = "jupyter-agent"};
    kb_server_t *server = kb_server_new(&conn, &sopts, err);
    kb_conn_release(&conn);
    if (!server)
        return NULL;
    ag_kernel_t *k = xcalloc(1, sizeof *k);
    k->server = server;
    k->inner = o->inner;
    k->ask = o->ask;
    k->model = o->model;
    k->info = s_kernel_info(o);
    k->history = json_array();
    ag_kernel_history_load(k);
    k->record = nb_record_new();
    kb_server_on(server, "execute_request", s_on_execute, k);
    ag_kernel_requests_register(k);
    return k;
}

/* The pid of the process that started us, from JPY_PARENT_PID (set by
 * jupyter_client unless the kernel is "independent"), or 0. */
static pid_t
s_parent_pid(void)
{
    const char *v = getenv("JPY_PARENT_PID");
    char *end = NULL;
    long pid = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || pid <= 1 || pid != (long)getppid())
        return 0;
    return (pid_t)pid;
}

int
ag_kernel_run(ag_kernel_t *k)
{
    pid_t parent = s_parent_pid();
    /* Frontends take "starting" as the first sign of life. */
    kb_server_status(k->server, NULL, "starting");
    while (!(kb_server_serve_once(k->server, 200) & KB_SERVER_SHUTDOWN)) {
        ag_kernel_expire(k); /* frees an idle sandbox between cells */
        /* Like ipykernel's ParentPoller: the manager died without shutting
         * us down (killed, crashed), so nobody can reach us any more. */
        if (parent && getppid() != parent) {
            log_warn("the process that started this kernel (pid %ld) is "
                     "gone; shutting down",
                     (long)parent);
            kb_server_stop(k->server);
        }
    }
    return 0;
}

void
ag_kernel_destroy(ag_kernel_t **pk)
{
    if (!pk || !*pk)
        return;
    ag_kernel_t *k = *pk;
    ag_session_destroy(&k->session);
    ag_kernel_set_ask_state(k, NULL, NULL);
    kb_server_destroy(&k->server);
    json_decref(k->info);
    json_decref(k->history);
    json_decref(k->cell_error);
    json_decref(k->cell_result);
    json_decref(k->cell_payload);
    json_decref(k->cell_user_expressions);
    free(k->history_path);
    nb_record_destroy(&k->record);
    free(k->model_owned);
    free(k->expired_note);
    free(k);
    *pk = NULL;
}
