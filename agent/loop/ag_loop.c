#include "agent/loop/ag_loop.h"
#include "agent/loop/ag_markdown.h"
#include "agent/loop/ag_pysrc.h"

#include "agent/loop/ag_packages_tool.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "sandbox/sb_sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef JUPYTER_AGENT_VERSION
#include "common/version.h"
#endif

struct ag_loop {
    ag_provider_t *provider;  /* owned */
    ag_session_t *session;    /* borrowed; NULL when env gives one */
    ag_tool_env_t env;        /* the effective tool environment */
    int timeout_ms;           /* per execution, 0 = none */
    int max_steps;            /* model turns per ask */
    char *autosave;           /* owned path or NULL */
    atomic_int own_cancel;    /* used when opts.cancel was NULL */
    const atomic_int *cancel; /* the flag in use (own_cancel or borrowed) */
    char *extra_system;       /* owned, or NULL */
    ag_conv_t *conv;          /* owned conversation */
    ag_tools_t *tools;        /* owned tool table */
    nb_record_t *rec;         /* notebook recorder; owned when own_rec */
    bool own_rec;             /* rec is ours to destroy */
    kb_displays_t *displays;  /* owned display_id registry (own executor) */
    bool prepared;            /* system prompt built, kernel recorded */
    json_t *environment;      /* owned probe result, or NULL */
    char *answer;             /* owned last answer, "" before any */
    ag_loop_stats_t totals;   /* summed over asks */
    const ag_loop_ui_t *ui;   /* borrowed, during an ask only */
    int64_t cell_t0;          /* when the running cell started (mono ms) */
    char started[32];         /* ISO time of the first ask */
    char ended[32];           /* ISO time the last ask ended */
    const char *status;       /* "new", "running", "answered", ... */
    char error[1024];         /* what ended the last ask badly, or "" */
};

/* ---- the loop's own executor (a session we were given) ----------------- */

static bool
s_cancelled(const ag_loop_t *l)
{
    return l->cancel && atomic_load(l->cancel) != 0;
}

static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    ag_loop_t *l = arg;
    if (!l->ui || !l->ui->on_output)
        return;
    const char *type = kb_msg_type(msg);
    if (strcmp(type, "stream") && strcmp(type, "display_data") &&
        strcmp(type, "execute_result") && strcmp(type, "error"))
        return;
    json_t *output = json_deep_copy(kb_msg_content(msg));
    if (!json_is_object(output)) {
        json_decref(output);
        return;
    }
    json_object_del(output, "transient");
    json_object_set_new(output, "output_type", json_string(type));
    l->ui->on_output(output, l->ui->arg);
    json_decref(output);
}

static bool
s_should_stop(void *arg)
{
    ag_loop_t *l = arg;
    if (l->ui && l->ui->on_wait)
        l->ui->on_wait(clock_mono_ms() - l->cell_t0, l->ui->arg);
    return s_cancelled(l);
}

static int
s_own_run(void *arg, const char *code, kb_output_t *out, err_t *err)
{
    ag_loop_t *l = arg;
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.allow_stdin = false;
    /* The model sends one cell at a time and needs each to run: with
     * stop_on_error, ipykernel aborts a request that arrives just after a
     * failed one (a replayed session, with no model latency, hits that). */
    xo.stop_on_error = false;
    kb_exec_hooks_t hooks = {
        .on_iopub = s_on_iopub, .should_stop = s_should_stop, .arg = l};
    l->cell_t0 = clock_mono_ms();
    return kb_kernel_execute(ag_session_kernel(l->session), code, &xo,
                             l->timeout_ms, out, &hooks, err);
}

static int
s_own_restart(void *arg, err_t *err)
{
    ag_loop_t *l = arg;
    kb_kernel_t *k = ag_session_kernel(l->session);
    if (kb_kernel_restart(k, err) < 0)
        return -1;
    if (ag_session_sandbox(l->session)) {
        /* The promised output folder, in case the workspace is new. */
        kb_exec_opts_t xo;
        kb_exec_opts_init(&xo);
        xo.store_history = false;
        kb_output_t *out = kb_output_new(NULL, 1 << 16);
        kb_kernel_execute(k,
                          "__import__('os').makedirs('/mnt/data/out', "
                          "exist_ok=True)\n",
                          &xo, 10000, out, NULL, NULL);
        kb_output_destroy(&out);
    }
    return 0;
}

static ag_session_t *
s_own_session(void *arg)
{
    return ((ag_loop_t *)arg)->session;
}

static ag_session_t *
s_session(ag_loop_t *l)
{
    return l->env.session ? l->env.session(l->env.arg) : l->session;
}

/* ---- life cycle ---------------------------------------------------------- */

ag_loop_t *
ag_loop_new(const ag_loop_opts_t *o, err_t *err)
{
    ag_provider_t *p = o && o->provider ? *o->provider : NULL;
    if (o && o->provider)
        *o->provider = NULL;
    if (!p) {
        err_set(err, ERR_USAGE, "the tool loop needs a provider");
        return NULL;
    }
    if (!o->env.run_python && !o->session) {
        ag_provider_destroy(&p);
        err_set(err, ERR_USAGE, "the tool loop needs a session to run code in");
        return NULL;
    }
    ag_loop_t *l = xcalloc(1, sizeof *l);
    l->provider = p;
    l->session = o->session;
    l->env = o->env;
    l->displays = kb_displays_new();
    if (!l->env.run_python) {
        l->env.run_python = s_own_run;
        l->env.restart = s_own_restart;
        l->env.session = s_own_session;
        l->env.arg = l;
        if (!l->env.displays)
            l->env.displays = l->displays;
    }
    l->timeout_ms = o->timeout_ms;
    l->max_steps = o->max_steps > 0 ? o->max_steps : AG_LOOP_MAX_STEPS;
    l->autosave = o->autosave ? xstrdup(o->autosave) : NULL;
    atomic_init(&l->own_cancel, 0);
    l->cancel = o->cancel ? o->cancel : &l->own_cancel;
    ag_provider_set_cancel(l->provider, l->cancel);
    l->extra_system = o->extra_system ? xstrdup(o->extra_system) : NULL;
    l->conv = ag_conv_new(NULL);
    l->tools = ag_tools_new();
    l->own_rec = o->record == NULL;
    l->rec = o->record ? o->record : nb_record_new();
    l->answer = xstrdup("");
    l->status = "new";
    return l;
}

void
ag_loop_destroy(ag_loop_t **pl)
{
    if (!pl || !*pl)
        return;
    ag_loop_t *l = *pl;
    ag_provider_destroy(&l->provider);
    ag_conv_destroy(&l->conv);
    ag_tools_destroy(&l->tools);
    if (l->own_rec)
        nb_record_destroy(&l->rec);
    kb_displays_destroy(&l->displays);
    json_decref(l->environment);
    free(l->autosave);
    free(l->extra_system);
    free(l->answer);
    free(l);
    *pl = NULL;
}

void
ag_loop_cancel(ag_loop_t *l)
{
    atomic_store(&l->own_cancel, 1);
}

const char *
ag_loop_answer(const ag_loop_t *l)
{
    return l->answer;
}

ag_loop_stats_t
ag_loop_totals(const ag_loop_t *l)
{
    return l->totals;
}

void
ag_loop_set_provider(ag_loop_t *l, ag_provider_t **provider)
{
    ag_provider_destroy(&l->provider);
    l->provider = *provider;
    *provider = NULL;
    ag_provider_set_cancel(l->provider, l->cancel);
}

ag_provider_t *
ag_loop_provider(ag_loop_t *l)
{
    return l->provider;
}

/* ---- the environment, as it is ------------------------------------------ */

static json_t *
s_probe(ag_loop_t *l, ag_session_t *s, bool sandboxed)
{
    /* Silently (not in the history): ag_env_probe.py. */
    char *code = xasprintf("%s\n__ja_env(%s); del __ja_env\n", ag_env_probe_py,
                           sandboxed ? "True" : "False");
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.store_history = false;
    kb_output_t *out = kb_output_new(NULL, 1 << 20);
    kb_output_merge_streams(out, true); /* read as text, whole */
    kb_exec_hooks_t hooks = {.should_stop = s_should_stop, .arg = l};
    const ag_loop_ui_t *ui = l->ui;
    l->ui = NULL; /* no progress display for the probe */
    err_t perr = {0};
    json_t *env = NULL;
    if (kb_kernel_execute(ag_session_kernel(s), code, &xo, 30000, out, &hooks,
                          &perr) == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            const char *t = json_string_value(json_object_get(o, "text"));
            const char *name = json_string_value(json_object_get(o, "name"));
            if (t && name && strcmp(name, "stdout") == 0) {
                env = json_loads(t, 0, NULL);
                break;
            }
        }
    } else {
        log_warn("ask: could not read the kernel's environment: %s", perr.text);
    }
    l->ui = ui;
    kb_output_destroy(&out);
    free(code);
    if (env && !json_is_object(env)) {
        json_decref(env);
        env = NULL;
    }
    return env;
}

static void
s_build_system(ag_loop_t *l, ag_session_t *s)
{
    sb_sandbox_t *box = s ? ag_session_sandbox(s) : NULL;
    /* A gateway kernel's own directory: the tools name it, not /mnt/data. */
    const char *remote = s ? kb_kernel_workdir(ag_session_kernel(s)) : NULL;
    if (remote)
        ag_tools_set_workdir(l->tools, remote);
    buf_t b;
    buf_init(&b, 0);
    buf_puts(&b, "You are a careful data analyst working in a Jupyter code "
                 "interpreter. You answer the user's request by running Python "
                 "with the `python` tool (each call is one notebook cell), "
                 "looking at the results, and then writing your answer in "
                 "Markdown.\n\nThe environment, as it is now:\n");
    json_t *env = l->environment;
    const char *py = json_string_value(json_object_get(env, "python"));
    buf_printf(&b,
               "- Python %s in an IPython kernel. Variables, imports and files "
               "persist between calls.\n",
               py ? py : "3");
    json_t *pk = json_object_get(env, "packages");
    if (json_object_size(pk)) {
        buf_puts(&b, "- Installed libraries: ");
        const char *k;
        json_t *v;
        int i = 0;
        json_object_foreach(pk, k, v)
            buf_printf(&b, "%s%s %s", i++ ? ", " : "", k, json_string_value(v));
        buf_puts(&b, ". Only these (and the standard library) are there.\n");
        if (json_object_get(pk, "openpyxl"))
            buf_printf(
                &b,
                "- Excel and OpenDocument files work with pandas "
                "read_excel/to_excel: .xlsx with openpyxl%s%s%s.\n",
                json_object_get(pk, "XlsxWriter")
                    ? " (or engine='xlsxwriter' to write)"
                    : "",
                json_object_get(pk, "xlrd") ? ", old .xls with xlrd" : "",
                json_object_get(pk, "odfpy") ? ", .ods with engine='odf'" : "");
    }
    if (box) {
        json_t *files = sb_sandbox_list_files(box, 200);
        size_t n = json_array_size(files);
        if (n == 0) {
            buf_puts(&b, "- /mnt/data (the working directory) is empty.\n");
        } else {
            buf_printf(&b, "- Files in /mnt/data (the working directory):");
            size_t i;
            json_t *f;
            json_array_foreach(files, i, f)
            {
                if (i == 50) {
                    buf_printf(&b, " … and %zu more (call list_files)", n - 50);
                    break;
                }
                char sz[32];
                buf_printf(&b, "%s %s (%s)", i ? "," : "",
                           json_string_value(json_object_get(f, "path")),
                           ag_tools_human_size(
                               json_integer_value(json_object_get(f, "size")),
                               sz, sizeof sz));
            }
            buf_puts(&b, ".\n");
        }
        json_decref(files);
        if (ag_session_packages_dir(s))
            buf_puts(&b, "- There is no network access, and pip cannot reach "
                         "PyPI: the install_packages tool installs extra "
                         "packages from the operator's signed manifest "
                         "(only those). When a library says to pip or conda "
                         "install something, use an installed library "
                         "instead, or ask that tool for it.\n");
        else
            buf_puts(&b, "- There is no network access: nothing can be "
                         "downloaded or installed with pip. When a library "
                         "says to pip or conda install something, use one "
                         "of the installed libraries above instead.\n");
        buf_puts(&b, "- Save every file you make for the user (charts, tables, "
                     "reports) in /mnt/data/out/ (it exists); those files are "
                     "handed to the user when the session ends.\n");
    } else if (remote) {
        buf_printf(&b,
                   "- The kernel runs on a Jupyter server, not on the user's "
                   "machine. Its working directory is %s, private to this "
                   "session: the input files are there (call list_files to "
                   "see them).\n"
                   "- Save every file you make for the user (charts, tables, "
                   "reports) in %s/out/ (it exists); those files are handed "
                   "to the user when the session ends.\n",
                   remote, remote);
    } else {
        const char *cwd = json_string_value(json_object_get(env, "cwd"));
        buf_printf(&b,
                   "- This kernel is NOT sandboxed: it runs on the user's own "
                   "machine with their permissions, in %s. Touch only the "
                   "files the user asked about, never delete anything, and "
                   "do not use the network unless asked.\n"
                   "- Save files you make for the user in that directory "
                   "unless told otherwise; call list_files to see what is "
                   "there.\n",
                   cwd ? cwd : "its working directory");
    }
    if (l->timeout_ms > 0)
        buf_printf(&b,
                   "- Each call may run for at most %g s; a longer cell is "
                   "interrupted.\n",
                   l->timeout_ms / 1000.0);
    buf_puts(&b,
             "- Plots: use matplotlib and call plt.show() to see a figure (you "
             "get the image); also save it with savefig when the user should "
             "keep it.\n"
             "- Tool output is cut to about 16 KiB per call: print summaries "
             "and the rows that matter, not whole tables.\n\n"
             "How to work: look at the data before assuming its shape; take "
             "small steps; when a cell fails, read the error and fix the code. "
             "Check numbers you report against the data. When you are done, "
             "answer without calling a tool: a clear Markdown answer that "
             "states the findings with the figures that support them and names "
             "the files you saved.");
    if (l->extra_system && *l->extra_system)
        buf_printf(&b, "\n\n%s", l->extra_system);
    ag_conv_set_system(l->conv, buf_cstr(&b));
    buf_release(&b);
}

static void
s_prepare(ag_loop_t *l)
{
    ag_session_t *s = s_session(l);
    if (s && ag_session_packages_dir(s)) {
        /* Offered only where it can work: the session has a manifest. */
        static const ag_tool_def_t install = {
            "install_packages", AG_PACKAGES_TOOL_DESCRIPTION,
            AG_PACKAGES_TOOL_PARAMETERS, ag_packages_tool_fn, NULL};
        ag_tools_add(l->tools, &install, NULL);
    }
    if (s) {
        l->environment = s_probe(l, s, ag_session_sandbox(s) != NULL);
        ag_session_record_kernel(s, l->rec);
    }
    s_build_system(l, s);
    l->prepared = true;
}

/* ---- recording ----------------------------------------------------------- */

/* A markdown cell as Jupyter should show it (currency is not LaTeX). */
static json_t *
s_add_markdown(ag_loop_t *l, const char *text)
{
    char *md = ag_markdown_escape_currency(text);
    json_t *cell = nb_record_add_markdown(l->rec, md);
    free(md);
    return cell;
}

static void
s_cell_meta(json_t *cell, json_t *fields)
{
    json_t *md = json_object_get(cell, "metadata");
    if (json_is_object(md))
        json_object_set_new(md, "jupyter_agent", fields);
    else
        json_decref(fields);
}

static void
s_record_user(ag_loop_t *l, const char *question)
{
    buf_t b;
    buf_init(&b, 0);
    buf_puts(&b, "**Request**\n\n");
    const char *p = question;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        buf_printf(&b, ">%s%.*s\n", n ? " " : "", (int)n, p);
        p += n + (nl ? 1 : 0);
    }
    json_t *cell = s_add_markdown(l, buf_cstr(&b));
    s_cell_meta(cell, json_pack("{s:s}", "role", "user"));
    buf_release(&b);
}

static bool
s_blank(const char *s)
{
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\n' && *s != '\t' && *s != '\r')
            return false;
    return true;
}

static void s_record_note(ag_loop_t *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
s_record_note(ag_loop_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    char *md = xasprintf("*jupyter-agent: %s*", text);
    json_t *cell = s_add_markdown(l, md);
    s_cell_meta(cell, json_pack("{s:s}", "role", "note"));
    free(md);
    free(text);
}

static void
s_record_result(ag_loop_t *l, const ag_tool_call_t *call,
                const ag_tool_result_t *res, ag_loop_stats_t *st)
{
    if (res->cell_source) {
        json_t *cell = nb_record_add_code(
            l->rec, res->cell_source, res->cell_outputs, res->execution_count,
            res->start_iso[0] ? res->start_iso : NULL,
            res->end_iso[0] ? res->end_iso : NULL);
        if (!cell)
            return;
        json_t *meta = json_pack("{s:s, s:s}", "tool", call->name,
                                 "tool_call_id", call->id);
        if (res->duration_ms > 0)
            json_object_set_new(meta, "duration_ms",
                                json_integer(res->duration_ms));
        if (res->cell_meta)
            json_object_update(meta, res->cell_meta);
        s_cell_meta(cell, meta);
        st->cells++;
    } else if (res->is_error) {
        s_record_note(l, "the tool call `%s` was refused: %s", call->name,
                      res->text);
    }
}

static json_t *
s_usage_json(ag_usage_t u)
{
    return json_pack("{s:I, s:I, s:I, s:I}", "input_tokens",
                     (json_int_t)u.input_tokens, "output_tokens",
                     (json_int_t)u.output_tokens, "requests",
                     (json_int_t)u.requests, "turns", (json_int_t)u.turns);
}

static void
s_update_metadata(ag_loop_t *l)
{
    ag_loop_stats_t *t = &l->totals;
    ag_usage_t u = ag_provider_usage(l->provider);
    json_t *m = json_pack(
        "{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:{s:s, s:s, s:I, "
        "s:I, s:I}}",
        "version", JUPYTER_AGENT_VERSION, "provider",
        ag_provider_name(l->provider), "model", ag_provider_model(l->provider),
        "status", l->status, "steps", t->steps, "tool_calls", t->tool_calls,
        "cells", t->cells, "max_steps", l->max_steps, "usage", s_usage_json(u),
        "timings", "started", l->started, "ended", l->ended, "wall_ms",
        (json_int_t)t->wall_ms, "model_ms", (json_int_t)t->model_ms, "tools_ms",
        (json_int_t)t->tools_ms);
    if (l->error[0])
        json_object_set_new(m, "error", json_string(l->error));
    if (l->timeout_ms > 0)
        json_object_set_new(m, "timeout_s", json_real(l->timeout_ms / 1000.0));
    ag_session_t *s = s_session(l);
    if (s) {
        json_object_set_new(m, "sandbox", ag_session_policy_json(s));
        json_object_set_new(m, "inputs", ag_session_inputs_json(s));
    }
    if (l->environment)
        json_object_set(m, "environment", l->environment);
    nb_record_set_metadata(l->rec, "jupyter_agent", m);
}

int
ag_loop_save(ag_loop_t *l, const char *path, err_t *err)
{
    s_update_metadata(l);
    return nb_record_save(l->rec, path, err);
}

/* ---- one ask ------------------------------------------------------------- */

static void
s_on_delta(const char *text, size_t len, void *arg)
{
    ag_loop_t *l = arg;
    if (l->ui && l->ui->on_text)
        l->ui->on_text(text, len, l->ui->arg);
}

static void s_notice(ag_loop_t *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
s_notice(ag_loop_t *l, const char *fmt, ...)
{
    if (!l->ui || !l->ui->on_notice)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    l->ui->on_notice(text, l->ui->arg);
    free(text);
}

static void
s_add_usage(ag_usage_t *a, const ag_usage_t *b)
{
    a->input_tokens += b->input_tokens;
    a->output_tokens += b->output_tokens;
    a->turns += b->turns;
    a->requests += b->requests;
}

static void
s_add_stats(ag_loop_stats_t *t, const ag_loop_stats_t *s)
{
    t->steps += s->steps;
    t->tool_calls += s->tool_calls;
    t->cells += s->cells;
    t->answered = s->answered;
    t->hit_max_steps = s->hit_max_steps;
    t->restarted = t->restarted || s->restarted;
    s_add_usage(&t->usage, &s->usage);
    t->wall_ms += s->wall_ms;
    t->model_ms += s->model_ms;
    t->tools_ms += s->tools_ms;
}

/* Run every call of one turn; answers each (also after a fatal failure,
 * so the conversation stays well-formed). Returns 0 or -1 + err. */
/* Crash safety: the notebook is replaced atomically (a temporary file,
 * fsync, rename, fsync of the directory) after every finished cell, so a
 * SIGKILL leaves a valid notebook holding every cell that finished. */
static void
s_autosave(ag_loop_t *l)
{
    if (!l->autosave)
        return;
    err_t serr = {0};
    l->status = "running";
    s_update_metadata(l);
    if (nb_record_save(l->rec, l->autosave, &serr) < 0)
        log_warn("ask: autosave failed: %s", serr.text);
}

static int
s_run_calls(ag_loop_t *l, const ag_turn_t *turn, ag_loop_stats_t *st,
            err_t *err)
{
    err_t fatal = {0};
    for (size_t i = 0; i < turn->ncalls; i++) {
        const ag_tool_call_t *call = &turn->calls[i];
        if (!fatal.code && s_cancelled(l))
            err_set(&fatal, ERR_INTERRUPTED, "interrupted");
        if (fatal.code) {
            ag_conv_add_tool_result(l->conv, call->id, call->name,
                                    "not run: the session stopped before "
                                    "this call",
                                    1, NULL, 0);
            continue;
        }
        if (l->ui && l->ui->on_tool_start) {
            const char *shown = call->arguments;
            json_t *args = json_loads(call->arguments, 0, NULL);
            const char *code = json_string_value(json_object_get(args, "code"));
            if (strcmp(call->name, "python") == 0 && code)
                shown = code;
            l->ui->on_tool_start(call->name, shown, l->ui->arg);
            json_decref(args);
        }
        ag_tool_result_t res;
        ag_tool_result_init(&res);
        int64_t t0 = clock_mono_ms();
        err_t terr = {0};
        int rc = ag_tools_call(l->tools, &l->env, call, &res, &terr);
        st->tools_ms += clock_mono_ms() - t0;
        st->tool_calls++;
        s_record_result(l, call, &res, st);
        s_autosave(l);
        ag_conv_add_tool_result(l->conv, call->id, call->name, res.text,
                                res.is_error, res.images, res.nimages);
        if (l->ui && l->ui->on_tool_end)
            l->ui->on_tool_end(call->name, &res, l->ui->arg);
        if (res.kernel_restarted) {
            st->restarted = true;
            s_notice(l, "the kernel died during that cell; a fresh one was "
                        "started (variables are gone) and the model was told");
        }
        ag_tool_result_release(&res);
        if (rc < 0)
            fatal = terr;
    }
    if (fatal.code) {
        if (err)
            *err = fatal;
        return -1;
    }
    return 0;
}

static void
s_finish(ag_loop_t *l, ag_loop_stats_t *st, int64_t t0, const char *status,
         const err_t *why)
{
    st->wall_ms = clock_mono_ms() - t0;
    l->status = status;
    if (why && why->text[0])
        snprintf(l->error, sizeof l->error, "%s", why->text);
    else
        l->error[0] = '\0';
    clock_iso8601_now(l->ended, sizeof l->ended);
    s_add_stats(&l->totals, st);
}

static const char *
s_status_for(int code)
{
    switch (code) {
    case ERR_INTERRUPTED:
        return "interrupted";
    case ERR_PROVIDER:
        return "provider_error";
    case ERR_KERNEL:
        return "kernel_error";
    default:
        return "error";
    }
}

int
ag_loop_ask(ag_loop_t *l, const char *question, const ag_loop_ui_t *ui,
            ag_loop_stats_t *stats, err_t *err)
{
    ag_loop_stats_t st = {0};
    int64_t t0 = clock_mono_ms();
    int rc = -1;
    err_t lerr = {0};
    if (l->cancel == &l->own_cancel)
        atomic_store(&l->own_cancel, 0);
    l->ui = ui;
    if (!l->started[0])
        clock_iso8601_now(l->started, sizeof l->started);
    l->status = "running";
    if (!l->prepared)
        s_prepare(l);
    ag_conv_add_user(l->conv, question);
    s_record_user(l, question);
    ag_stream_cb_t cb = {.on_text_delta = s_on_delta, .arg = l};

    for (;;) {
        if (st.steps >= l->max_steps) {
            st.hit_max_steps = true;
            s_notice(l,
                     "stopped after %d steps without a final answer; raise "
                     "--max-steps to let the model go on",
                     l->max_steps);
            s_record_note(l,
                          "stopped after %d steps without a final answer "
                          "(--max-steps)",
                          l->max_steps);
            s_finish(l, &st, t0, "max_steps", NULL);
            rc = 0;
            goto out;
        }
        ag_turn_t turn = {0};
        int64_t m0 = clock_mono_ms();
        int trc =
            ag_provider_turn(l->provider, l->conv, ag_tools_schemas(l->tools),
                             &cb, &turn, &lerr);
        st.model_ms += clock_mono_ms() - m0;
        if (trc < 0) {
            if (lerr.code == ERR_INTERRUPTED)
                s_record_note(l, "interrupted while waiting for the model");
            else
                s_record_note(l, "the model could not be reached: %s",
                              lerr.text);
            s_finish(l, &st, t0, s_status_for(lerr.code), &lerr);
            goto out;
        }
        st.steps++;
        ag_usage_t tu = turn.usage;
        tu.turns = 1;
        s_add_usage(&st.usage, &tu);
        ag_conv_add_assistant(l->conv, turn.text, turn.calls, turn.ncalls);
        if (!s_blank(turn.text)) {
            json_t *cell = s_add_markdown(l, turn.text);
            s_cell_meta(cell, json_pack("{s:s}", "role", "assistant"));
        }
        if (ui && ui->on_turn)
            ui->on_turn(turn.text, turn.ncalls, ui->arg);
        if (turn.ncalls == 0) {
            free(l->answer);
            l->answer = xstrdup(turn.text);
            st.answered = true;
            if (turn.stop == AG_STOP_MAX_TOKENS)
                s_notice(l, "the answer was cut at the model's output token "
                            "limit");
            ag_turn_release(&turn);
            s_finish(l, &st, t0, "answered", NULL);
            rc = 0;
            goto out;
        }
        int crc = s_run_calls(l, &turn, &st, &lerr);
        ag_turn_release(&turn);
        if (crc < 0) {
            s_record_note(l, "%s",
                          lerr.code == ERR_INTERRUPTED
                              ? "interrupted while a cell ran"
                              : lerr.text);
            s_finish(l, &st, t0, s_status_for(lerr.code), &lerr);
            goto out;
        }
    }
out:
    /* The recorder always carries this ask's totals, also for a caller
     * that saves it itself (the agent kernel's %export). */
    s_update_metadata(l);
    if (l->autosave) {
        err_t serr = {0};
        if (ag_loop_save(l, l->autosave, &serr) < 0 && rc == 0) {
            lerr = serr;
            rc = -1;
        }
    }
    if (rc < 0 && err)
        *err = lerr;
    if (stats)
        *stats = st;
    l->ui = NULL;
    return rc;
}
