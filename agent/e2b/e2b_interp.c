#include "agent/e2b/e2b_interp.h"

#include "agent/e2b/e2b_pysrc.h"
#include "agent/loop/ag_chart.h"
#include "agent/session/ag_outputs.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/kb_output.h"
#include "kernel-bridge/wire/kb_msg.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONTEXTS 32
#define KEEPALIVE_LINE "{\"type\":\"keepalive\"}\n"
#define KEEPALIVE_S 5

/* A context: a namespace of the sandbox's one kernel (e2b_interp.py). */
typedef struct s_ctx {
    char id[33];
    char *cwd; /* owned */
} s_ctx_t;

/* The interpreter's state of one sandbox (its E2B_SLOT_INTERP). */
typedef struct s_interp {
    pthread_mutex_t lock; /* guards ctx and nctx */
    s_ctx_t ctx[MAX_CONTEXTS];
    int nctx;
    bool ready;   /* the helpers are loaded (sandbox thread only) */
    char cur[33]; /* the context whose namespace is installed (ditto) */
} s_interp_t;

static void *
s_interp_new(e2b_sandbox_t *sb)
{
    (void)sb;
    s_interp_t *in = xcalloc(1, sizeof *in);
    pthread_mutex_init(&in->lock, NULL);
    snprintf(in->cur, sizeof in->cur, "default");
    return in;
}

static void
s_interp_free(void *p)
{
    s_interp_t *in = p;
    for (int i = 0; i < in->nctx; i++)
        free(in->ctx[i].cwd);
    pthread_mutex_destroy(&in->lock);
    free(in);
}

/* The kernel went (a pause, the end): its namespaces with it. */
static void
s_interp_end(e2b_sandbox_t *sb, void *p)
{
    (void)sb;
    s_interp_t *in = p;
    in->ready = false;
    snprintf(in->cur, sizeof in->cur, "default");
}

static s_interp_t *
s_interp(e2b_sandbox_t *sb)
{
    return e2b_sandbox_slot(sb, E2B_SLOT_INTERP, s_interp_new, s_interp_end,
                            s_interp_free);
}

/* Index of context `id`, with in->lock held; -1 if none. */
static int
s_ctx_find(s_interp_t *in, const char *id)
{
    for (int i = 0; i < in->nctx; i++)
        if (strcmp(in->ctx[i].id, id) == 0)
            return i;
    return -1;
}

static json_t *
s_ctx_json(const char *id, const char *cwd)
{
    return json_pack("{s:s, s:s, s:s}", "id", id, "language", "python", "cwd",
                     cwd ? cwd : E2B_HOME);
}

/* ---- silent helper calls in the kernel --------------------------------- */

/* Run `code` silently; 0, or -1 + err (the Python error's text). */
static int
s_silent(ag_session_t *s, const char *code, err_t *err)
{
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    xo.stop_on_error = false;
    kb_output_t *out = kb_output_new(NULL, 1 << 16);
    int rc = kb_kernel_execute(ag_session_kernel(s), code, &xo, 30000, out,
                               NULL, err);
    if (rc == 0 &&
        strcmp(kb_output_status(out) ? kb_output_status(out) : "", "ok") != 0) {
        json_t *o = json_array_get(kb_output_outputs(out), 0);
        rc = err_set(err, ERR_KERNEL, "%s: %s",
                     json_string_value(json_object_get(o, "ename"))
                         ? json_string_value(json_object_get(o, "ename"))
                         : "error",
                     json_string_value(json_object_get(o, "evalue"))
                         ? json_string_value(json_object_get(o, "evalue"))
                         : "");
    }
    kb_output_destroy(&out);
    return rc;
}

/* A Python string literal for `text` (JSON's escapes are Python's). */
static char *
s_pylit(const char *text)
{
    json_t *j = json_string(text);
    char *lit = json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    json_decref(j);
    return lit;
}

/* Load the helpers into the kernel, chdir to /home/user, set envVars. */
static int
s_setup(e2b_sandbox_t *sb, s_interp_t *in, err_t *err)
{
    if (in->ready)
        return 0;
    char *env = json_dumps(e2b_sandbox_env(sb), JSON_COMPACT);
    char *envlit = s_pylit(env);
    char *code = xasprintf("%s\n__import__('_ja_e2b').setup(%s)\n",
                           e2b_interp_py, envlit);
    int rc = s_silent(e2b_sandbox_session(sb), code, err);
    free(code);
    free(envlit);
    free(env);
    if (rc == 0)
        in->ready = true;
    return rc;
}

/* Install context `id`'s namespace (cwd: its directory, NULL = kept). */
static int
s_switch(e2b_sandbox_t *sb, s_interp_t *in, const char *id, const char *cwd,
         err_t *err)
{
    if (strcmp(in->cur, id) == 0 && !cwd)
        return 0;
    char *idl = s_pylit(id);
    char *cwdl = cwd ? s_pylit(cwd) : xstrdup("None");
    char *code = xasprintf("__import__('_ja_e2b').switch(%s, %s)\n", idl, cwdl);
    int rc = s_silent(e2b_sandbox_session(sb), code, err);
    free(code);
    free(cwdl);
    free(idl);
    if (rc == 0)
        snprintf(in->cur, sizeof in->cur, "%s", id);
    return rc;
}

/* ---- /execute ---------------------------------------------------------- */

typedef struct s_exec {
    ag_reg_entry_t *entry; /* a reference until the job is done */
    e2b_stream_t *st;      /* the producer's reference */
    char *code;            /* owned */
    char ctx[33];          /* the context to run in */
    char *env;             /* owned JSON object text, or NULL */
    size_t sent;           /* bytes of lines written */
    size_t cap;            /* the session's --max-output */
    bool capped;           /* the cap was met: the rest is dropped */
    e2b_sandbox_t *sb;
} s_exec_t;

static void
s_line(s_exec_t *x, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    size_t n = strlen(text);
    if (x->capped) {
        free(text);
        return;
    }
    if (x->sent + n > x->cap) {
        x->capped = true;
        char *note = xasprintf(
            "{\"type\":\"stderr\",\"text\":\"[jupyter-agent: output over "
            "%zu bytes (--max-output); the rest of this execution's output "
            "was dropped]\\n\"}\n",
            x->cap);
        e2b_stream_write(x->st, note, strlen(note));
        free(note);
        free(text);
        return;
    }
    x->sent += n + 1;
    text = xrealloc(text, n + 2);
    text[n] = '\n';
    text[n + 1] = '\0';
    e2b_stream_write(x->st, text, n + 1);
    free(text);
}

/* A result's MIME bundle in E2B's field names; unknown types go to extra. */
static json_t *
s_result(const json_t *data, bool is_main)
{
    static const struct {
        const char *mime, *field;
    } map[] = {
        {"text/plain", "text"},        {"text/html", "html"},
        {"text/markdown", "markdown"}, {"image/svg+xml", "svg"},
        {"image/png", "png"},          {"image/jpeg", "jpeg"},
        {"application/pdf", "pdf"},    {"text/latex", "latex"},
        {"application/json", "json"},  {"application/javascript", "javascript"},
        {"e2b/data", "data"},          {"e2b/chart", "chart"},
    };
    json_t *r =
        json_pack("{s:s, s:b}", "type", "result", "is_main_result", is_main);
    json_t *extra = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)data, k, v)
    {
        /* Our chart and table data become the SDK's `chart` and `data`
         * (docs/outputs.md); E2B's results do not list those mime types. */
        if (strcmp(k, AG_OUTPUTS_CHART_MIME) == 0) {
            json_t *chart = ag_chart_e2b(v);
            if (chart)
                json_object_set_new(r, "chart", chart);
            continue;
        }
        if (strcmp(k, AG_OUTPUTS_TABLE_MIME) == 0) {
            json_t *table = ag_table_e2b(v);
            if (table)
                json_object_set_new(r, "data", table);
            continue;
        }
        const char *field = NULL;
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (strcmp(k, map[i].mime) == 0)
                field = map[i].field;
        if (!field) {
            json_object_set(extra, k, v);
            continue;
        }
        const char *t = json_string_value(v);
        size_t tl = t ? strlen(t) : 0;
        /* As E2B's server does: a str's repr 'x' is shown as x. */
        if (strcmp(field, "text") == 0 && tl >= 2 && t[0] == '\'' &&
            t[tl - 1] == '\'')
            json_object_set_new(r, field, json_stringn(t + 1, tl - 2));
        else
            json_object_set(r, field, v);
    }
    if (json_object_size(extra))
        json_object_set(r, "extra", extra);
    json_decref(extra);
    return r;
}

static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    s_exec_t *x = arg;
    const char *type = kb_msg_type(msg);
    const json_t *c = kb_msg_content(msg);
    char ts[40];
    if (strcmp(type, "execute_input") == 0) {
        s_line(x, json_pack("{s:s, s:O}", "type", "number_of_executions",
                            "execution_count",
                            json_object_get(c, "execution_count")));
    } else if (strcmp(type, "stream") == 0) {
        const char *name = json_string_value(json_object_get(c, "name"));
        clock_iso8601_now(ts, sizeof ts);
        s_line(x, json_pack(
                      "{s:s, s:O, s:s}", "type",
                      name && strcmp(name, "stderr") == 0 ? "stderr" : "stdout",
                      "text", json_object_get(c, "text"), "timestamp", ts));
    } else if (strcmp(type, "execute_result") == 0 ||
               strcmp(type, "display_data") == 0) {
        const json_t *data = json_object_get(c, "data");
        if (json_is_object(data))
            s_line(x, s_result(data, strcmp(type, "execute_result") == 0));
    } else if (strcmp(type, "error") == 0) {
        json_t *tb = json_object_get(c, "traceback");
        char *joined = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&joined, &n);
        size_t i;
        json_t *line;
        json_array_foreach(tb, i, line)
            fprintf(f, "%s%s", i ? "\n" : "",
                    json_string_value(line) ? json_string_value(line) : "");
        fclose(f);
        const char *ename = json_string_value(json_object_get(c, "ename"));
        const char *evalue = json_string_value(json_object_get(c, "evalue"));
        s_line(x,
               json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name",
                         ename ? ename : "Error", "value", evalue ? evalue : "",
                         "traceback", joined ? joined : ""));
        free(joined);
    }
}

static bool
s_should_stop(void *arg)
{
    s_exec_t *x = arg;
    return e2b_stream_gone(x->st) || e2b_sandbox_ending(x->sb);
}

static void
s_exec_error(s_exec_t *x, const char *name, const char *value)
{
    s_line(x, json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", name,
                        "value", value, "traceback", value));
}

static void
s_exec_free(s_exec_t *x)
{
    e2b_stream_close(&x->st);
    ag_reg_unref(&x->entry);
    free(x->code);
    free(x->env);
    free(x);
}

/* On the sandbox's thread. */
static void
s_exec_run(e2b_sandbox_t *sb, void *arg)
{
    s_exec_t *x = arg;
    err_t err = {0};
    s_interp_t *in = s_interp(sb);
    if (e2b_sandbox_ending(sb) || !e2b_sandbox_session(sb)) {
        s_exec_error(x, "SandboxError",
                     "the sandbox ended before this code could run");
        goto out;
    }
    if (e2b_stream_gone(x->st))
        goto out; /* the client left while it waited */
    ag_session_t *s = e2b_sandbox_session(sb);
    const char *cwd = NULL;
    pthread_mutex_lock(&in->lock);
    int i = s_ctx_find(in, x->ctx);
    char *ctx_cwd = i >= 0 && in->ctx[i].cwd ? xstrdup(in->ctx[i].cwd) : NULL;
    pthread_mutex_unlock(&in->lock);
    if (strcmp(in->cur, x->ctx) != 0)
        cwd = ctx_cwd;
    if (s_setup(sb, in, &err) < 0 || s_switch(sb, in, x->ctx, cwd, &err) < 0) {
        free(ctx_cwd);
        s_exec_error(x, "SandboxError", err.text);
        goto out;
    }
    free(ctx_cwd);
    if (x->env) {
        char *lit = s_pylit(x->env);
        char *code = xasprintf("__import__('_ja_e2b').env_push(%s)\n", lit);
        free(lit);
        int rc = s_silent(s, code, &err);
        free(code);
        if (rc < 0) {
            s_exec_error(x, "SandboxError", err.text);
            goto out;
        }
    }
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.stop_on_error = false;
    kb_exec_hooks_t hooks = {
        .on_iopub = s_on_iopub, .should_stop = s_should_stop, .arg = x};
    kb_output_t *out = kb_output_new(NULL, x->cap);
    int rc =
        kb_kernel_execute(ag_session_kernel(s), x->code, &xo,
                          e2b_sandbox_exec_timeout_ms(sb), out, &hooks, &err);
    kb_output_destroy(&out);
    if (rc < 0 && err.code == ERR_TIMEOUT)
        s_exec_error(x, "TimeoutError", err.text);
    else if (rc < 0 && err.code == ERR_INTERRUPTED)
        log_info("e2b: sandbox %.8s…: execution interrupted (%s)",
                 e2b_sandbox_id(sb),
                 e2b_stream_gone(x->st) ? "the client left" : "ending");
    else if (rc < 0)
        s_exec_error(x, "KernelError", err.text);
    if (x->env && !e2b_sandbox_ending(sb))
        s_silent(s, "__import__('_ja_e2b').env_pop()\n", NULL);
out:
    if (!e2b_stream_gone(x->st))
        s_line(x, json_pack("{s:s}", "type", "end_of_execution"));
    s_exec_free(x);
}

static void
s_execute(e2b_req_t *r, e2b_sandbox_t *sb)
{
    json_error_t je;
    json_t *body = json_loadb(r->body, r->body_len, 0, &je);
    const char *code = json_string_value(json_object_get(body, "code"));
    if (!code) {
        e2b_reply_error(r, 400, "POST /execute needs {\"code\": \"...\"}%s%s",
                        body ? "" : ": ", body ? "" : je.text);
        json_decref(body);
        return;
    }
    const char *lang = json_string_value(json_object_get(body, "language"));
    const char *ctx = json_string_value(json_object_get(body, "context_id"));
    json_t *env = json_object_get(body, "env_vars");
    if (lang && strcmp(lang, "python") != 0 && strcmp(lang, "python3") != 0) {
        e2b_reply_error(r, 400,
                        "language '%.40s' is not supported: this sandbox "
                        "runs Python only",
                        lang);
        json_decref(body);
        return;
    }
    if (env && !json_is_null(env) && !json_is_object(env)) {
        e2b_reply_error(r, 400, "env_vars must be an object of strings");
        json_decref(body);
        return;
    }
    s_interp_t *in = s_interp(sb);
    if (ctx && strcmp(ctx, "default") != 0 && strcmp(ctx, "python") != 0) {
        pthread_mutex_lock(&in->lock);
        int i = s_ctx_find(in, ctx);
        pthread_mutex_unlock(&in->lock);
        if (i < 0) {
            e2b_reply_error(r, 404, "context '%.64s' not found", ctx);
            json_decref(body);
            return;
        }
    } else {
        ctx = "default";
    }
    s_exec_t *x = xcalloc(1, sizeof *x);
    x->sb = sb;
    x->code = xstrdup(code);
    snprintf(x->ctx, sizeof x->ctx, "%s", ctx);
    if (json_object_size(env))
        x->env = json_dumps(env, JSON_COMPACT);
    x->cap = e2b_sandbox_max_output(sb);
    json_decref(body);
    x->st = e2b_stream_open(r, 200, "application/json", KEEPALIVE_LINE,
                            KEEPALIVE_S);
    if (!x->st) {
        free(x->code);
        free(x->env);
        free(x);
        return;
    }
    x->entry = ag_reg_ref(e2b_sandbox_entry(sb));
    e2b_sandbox_post(sb, s_exec_run, x);
}

/* ---- contexts ---------------------------------------------------------- */

typedef struct s_ctx_call {
    const char *id;
    bool restart; /* else: forget (delete) */
    int rc;
    err_t err;
} s_ctx_call_t;

static void
s_ctx_call(e2b_sandbox_t *sb, void *arg)
{
    s_ctx_call_t *c = arg;
    s_interp_t *in = s_interp(sb);
    ag_session_t *s = e2b_sandbox_session(sb);
    if (!in->ready) { /* nothing ran: nothing to clear */
        c->rc = 0;
        return;
    }
    if (c->restart && strcmp(c->id, "default") == 0 &&
        !kb_kernel_alive(ag_session_kernel(s))) {
        c->rc = kb_kernel_restart(ag_session_kernel(s), &c->err);
        in->ready = false;
        snprintf(in->cur, sizeof in->cur, "default");
        return;
    }
    char *idl = s_pylit(c->id);
    char *code = xasprintf("__import__('_ja_e2b').forget(%s)\n", idl);
    c->rc = s_silent(s, code, &c->err);
    free(code);
    free(idl);
    if (!c->restart && strcmp(in->cur, c->id) == 0)
        c->rc = c->rc ? c->rc : s_switch(sb, in, "default", NULL, &c->err);
}

static void
s_contexts(e2b_req_t *r, e2b_sandbox_t *sb, const char *rest)
{
    s_interp_t *in = s_interp(sb);
    bool get = strcmp(r->method, "GET") == 0;
    bool post = strcmp(r->method, "POST") == 0;
    bool del = strcmp(r->method, "DELETE") == 0;
    if (!*rest && get) {
        json_t *a = json_array();
        json_array_append_new(a, s_ctx_json("default", E2B_HOME));
        pthread_mutex_lock(&in->lock);
        for (int i = 0; i < in->nctx; i++)
            json_array_append_new(a, s_ctx_json(in->ctx[i].id, in->ctx[i].cwd));
        pthread_mutex_unlock(&in->lock);
        {
            e2b_reply_json(r, 200, a);
            return;
        }
    }
    if (!*rest && post) {
        json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, NULL)
                                   : json_object();
        const char *lang = json_string_value(json_object_get(body, "language"));
        const char *cwd = json_string_value(json_object_get(body, "cwd"));
        if (lang && strcmp(lang, "python") != 0 &&
            strcmp(lang, "python3") != 0) {
            json_decref(body);
            {
                e2b_reply_error(r, 400,
                                "language '%.40s' is not supported: "
                                "contexts here run Python only",
                                lang);
                return;
            }
        }
        if (cwd && cwd[0] != '/') {
            json_decref(body);
            {
                e2b_reply_error(r, 400, "cwd must be an absolute path");
                return;
            }
        }
        pthread_mutex_lock(&in->lock);
        if (in->nctx >= MAX_CONTEXTS) {
            pthread_mutex_unlock(&in->lock);
            json_decref(body);
            e2b_reply_error(r, 429,
                            "a sandbox has at most %d contexts: remove one "
                            "first",
                            MAX_CONTEXTS);
            return;
        }
        s_ctx_t *c = &in->ctx[in->nctx++];
        unsigned char raw[16];
        randombytes_buf(raw, sizeof raw);
        sodium_bin2hex(c->id, sizeof c->id, raw, sizeof raw);
        c->cwd = xstrdup(cwd ? cwd : E2B_HOME);
        json_t *j = s_ctx_json(c->id, c->cwd);
        pthread_mutex_unlock(&in->lock);
        json_decref(body);
        {
            e2b_reply_json(r, 200, j);
            return;
        }
    }
    char id[40];
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n == 0 || n >= sizeof id) {
        e2b_reply_error(r, 404, "no such context");
        return;
    }
    memcpy(id, rest, n);
    id[n] = '\0';
    bool restart = slash && strcmp(slash, "/restart") == 0 && post;
    if (!(restart || (!slash && del))) {
        e2b_reply_error(r, 405,
                        "use DELETE /contexts/ID or POST "
                        "/contexts/ID/restart");
        return;
    }
    bool is_default = strcmp(id, "default") == 0 || strcmp(id, "python") == 0;
    pthread_mutex_lock(&in->lock);
    int i = s_ctx_find(in, id);
    pthread_mutex_unlock(&in->lock);
    if (i < 0 && !is_default) {
        e2b_reply_error(r, 404, "context '%s' not found", id);
        return;
    }
    if (is_default && del) {
        e2b_reply_error(r, 400,
                        "the default context cannot be removed: "
                        "restart it instead");
        return;
    }
    s_ctx_call_t c = {.id = is_default ? "default" : id, .restart = restart};
    if (e2b_sandbox_call(sb, s_ctx_call, &c) < 0) {
        e2b_reply_error(r, 404, "the sandbox ended");
        return;
    }
    if (del) {
        pthread_mutex_lock(&in->lock);
        i = s_ctx_find(in, id);
        if (i >= 0) {
            free(in->ctx[i].cwd);
            in->ctx[i] = in->ctx[--in->nctx];
        }
        pthread_mutex_unlock(&in->lock);
    }
    if (c.rc < 0) {
        e2b_reply_error(r, 500, "context %s: %s", id, c.err.text);
        return;
    }
    e2b_reply_empty(r, 204);
}

void
e2b_interp_handle(e2b_req_t *r, e2b_sandbox_t *sb)
{
    if (strcmp(r->path, "/health") == 0) {
        e2b_reply_json(r, 200, json_string("OK"));
        return;
    }
    if (strcmp(r->path, "/execute") == 0) {
        if (strcmp(r->method, "POST") != 0) {
            e2b_reply_error(r, 405, "POST /execute");
            return;
        }
        {
            s_execute(r, sb);
            return;
        }
    }
    if (strcmp(r->path, "/contexts") == 0) {
        s_contexts(r, sb, "");
        return;
    }
    if (strncmp(r->path, "/contexts/", 10) == 0) {
        s_contexts(r, sb, r->path + 10);
        return;
    }
    e2b_reply_error(r, 404, "no such endpoint on the code interpreter: %s %s",
                    r->method, r->path);
}
