#include "notebook-io/nb_run.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/escape.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_output.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "notebook-io/nb_json.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_SKIP_TAG "skip-execution"
#define RAISES_TAG "raises-exception"

/* --- UTF-8 ------------------------------------------------------------- */

/* Python's str.isspace() for one code point. */
static bool
s_py_space(long cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) ||
           cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

bool
nb_run_source_blank(const char *source)
{
    const unsigned char *s = (const unsigned char *)(source ? source : "");
    size_t len = strlen((const char *)s), i = 0;
    while (i < len)
        if (!s_py_space(utf8_decode(s, len, &i)))
            return false;
    return true;
}

/* --- cells ------------------------------------------------------------- */

static bool
s_has_tag(const json_t *cell, const char *tag)
{
    json_t *tags = json_object_get(json_object_get(cell, "metadata"), "tags");
    size_t i;
    json_t *t;
    json_array_foreach(tags, i, t)
    {
        const char *s = json_string_value(t);
        if (s && strcmp(s, tag) == 0)
            return true;
    }
    return false;
}

/* nbclient runs a cell iff it is code, not blank, and not skip-tagged. */
static bool
s_runnable(const json_t *cell, const char *skip_tag)
{
    const char *type = nb_cell_type(cell);
    return type && strcmp(type, "code") == 0 &&
           !nb_run_source_blank(nb_cell_source(cell)) &&
           !s_has_tag(cell, skip_tag);
}

/* The cell's metadata object, created if missing. Borrowed. */
static json_t *
s_cell_metadata(json_t *cell)
{
    json_t *md = json_object_get(cell, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(cell, "metadata", md);
    }
    return md;
}

/* Is `cell` a recorded session's note that the kernel was reset here? */
static bool
s_is_reset(const json_t *cell)
{
    const char *type = nb_cell_type(cell);
    const char *action = json_string_value(json_object_get(
        json_object_get(json_object_get(cell, "metadata"), "jupyter_agent"),
        "action"));
    return type && strcmp(type, "markdown") == 0 && action &&
           strcmp(action, "reset") == 0;
}

/* Is `cell` a tool call of an agent session (ask, mcp), after which the
 * session went on whatever the call's end? */
static bool
s_tool_cell(const json_t *cell)
{
    return json_is_string(json_object_get(
        json_object_get(json_object_get(cell, "metadata"), "jupyter_agent"),
        "tool"));
}

/* The limit for `cell`: its recorded timeout_s when set and lower than
 * `limit_ms` (<= 0: none), else `limit_ms`. */
static int
s_recorded_timeout(const json_t *cell, int limit_ms)
{
    json_t *t = json_object_get(
        json_object_get(json_object_get(cell, "metadata"), "jupyter_agent"),
        "timeout_s");
    double secs = json_number_value(t);
    if (!json_is_number(t) || !(secs > 0) || secs > 86400.0 * 365)
        return limit_ms;
    int ms = secs * 1000 < 1 ? 1 : (int)(secs * 1000);
    return limit_ms <= 0 || ms < limit_ms ? ms : limit_ms;
}

/* Code cells from `first` on look never executed (papermill's state for
 * cells a stopped run did not reach). */
static void
s_clear_from(nb_notebook_t *nb, size_t first)
{
    for (size_t i = first; i < nb_notebook_ncells(nb); i++) {
        json_t *cell = nb_notebook_cell(nb, i);
        const char *type = nb_cell_type(cell);
        if (!type || strcmp(type, "code") != 0)
            continue;
        json_object_set_new(cell, "outputs", json_array());
        json_object_set_new(cell, "execution_count", json_null());
        json_object_del(s_cell_metadata(cell), "execution");
    }
}

/* nbclient's error output, for what the kernel could not report. */
static json_t *
s_error_output(const char *ename, const char *evalue)
{
    char *line = xasprintf("%s: %s", ename, evalue);
    json_t *o = json_pack("{s:s, s:s, s:s, s:[s]}", "output_type", "error",
                          "ename", ename, "evalue", evalue, "traceback", line);
    free(line);
    return o;
}

/* The cell's first error output, or NULL. Borrowed. */
static json_t *
s_first_error(json_t *outputs)
{
    size_t i;
    json_t *o;
    json_array_foreach(outputs, i, o)
    {
        const char *t = json_string_value(json_object_get(o, "output_type"));
        if (t && strcmp(t, "error") == 0)
            return o;
    }
    return NULL;
}

/* Append `o` (stolen) to the cell's outputs. The array is kb_output's, so
 * the cell gets its own copy holding the same output objects (display
 * updates still reach them). */
static void
s_append_output(json_t *cell, json_t *o)
{
    json_t *mine = json_array();
    json_array_extend(mine, json_object_get(cell, "outputs"));
    json_array_append_new(mine, o);
    json_object_set_new(cell, "outputs", mine);
}

/* --- timing ------------------------------------------------------------ */

/* A Jupyter message date as nbclient writes it after jupyter_client parsed
 * it: "YYYY-MM-DDTHH:MM:SS.ffffffZ". Accepts the kernel's ISO 8601 in UTC
 * ("Z" or "+00:00", any number of fraction digits); 0, or -1 if it is not
 * that (the caller then uses the host clock). */
static int
s_norm_date(const char *d, char out[40])
{
    if (!d || strlen(d) < 19)
        return -1;
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    for (size_t i = 0; i < 19; i++)
        if (shape[i] == 'd' ? !isdigit((unsigned char)d[i]) : d[i] != shape[i])
            return -1;
    char frac[7] = "000000";
    const char *p = d + 19;
    if (*p == '.') {
        p++;
        size_t n = 0;
        while (isdigit((unsigned char)*p)) {
            if (n < 6)
                frac[n] = *p;
            n++, p++;
        }
        if (n == 0)
            return -1;
    }
    if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
        return -1;
    snprintf(out, 40, "%.19s.%sZ", d, frac);
    return 0;
}

static void
s_set_timing(json_t *cell, const char *key, const char *iso)
{
    json_t *md = s_cell_metadata(cell);
    json_t *ex = json_object_get(md, "execution");
    if (!json_is_object(ex)) {
        ex = json_object();
        json_object_set_new(md, "execution", ex);
    }
    json_object_set_new(ex, key, json_string(iso));
}

/* What the iopub hook needs: the cell being run and the caller's hooks. */
typedef struct run_ctx {
    json_t *cell;                 /* borrowed; the cell executing */
    const kb_exec_hooks_t *outer; /* the caller's hooks */
} run_ctx_t;

static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    run_ctx_t *ctx = arg;
    const char *type = kb_msg_type(msg);
    const char *key = NULL;
    if (strcmp(type, "execute_input") == 0) {
        key = "iopub.execute_input";
    } else if (strcmp(type, "status") == 0) {
        const char *st = json_string_value(
            json_object_get(kb_msg_content(msg), "execution_state"));
        if (st && strcmp(st, "busy") == 0)
            key = "iopub.status.busy";
        else if (st && strcmp(st, "idle") == 0)
            key = "iopub.status.idle";
    }
    if (key) {
        char iso[40];
        const char *date =
            json_string_value(json_object_get(kb_msg_header(msg), "date"));
        if (s_norm_date(date, iso))
            clock_iso8601_now(iso, sizeof iso);
        s_set_timing(ctx->cell, key, iso);
    }
    if (ctx->outer->on_iopub)
        ctx->outer->on_iopub(msg, ctx->outer->arg);
}

static bool
s_should_stop(void *arg)
{
    run_ctx_t *ctx = arg;
    return ctx->outer->should_stop && ctx->outer->should_stop(ctx->outer->arg);
}

/* --- the run ----------------------------------------------------------- */

void
nb_run_opts_init(nb_run_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->skip_tag = DEFAULT_SKIP_TAG;
    o->max_output_bytes = KB_DEFAULT_MAX_OUTPUT;
}

/* nbclient sets language_info from kernel_info_reply; we also give a
 * notebook without kernelspec the one that ran it. */
static void
s_set_kernel_metadata(nb_notebook_t *nb, kb_kernel_t *k)
{
    json_t *md = nb_notebook_metadata(nb);
    json_t *li = json_object_get(kb_kernel_info(k), "language_info");
    if (json_is_object(li))
        json_object_set_new(md, "language_info", json_deep_copy(li));
    const kb_kernelspec_t *ks = kb_kernel_spec(k);
    if (json_object_get(md, "kernelspec") || !ks)
        return;
    json_t *spec = json_pack(
        "{s:s, s:s}", "name", ks->name, "display_name",
        ks->display_name && *ks->display_name ? ks->display_name : ks->name);
    if (!spec)
        return; /* not UTF-8: leave it out */
    if (ks->language && *ks->language)
        json_object_set_new(spec, "language", json_string(ks->language));
    json_object_set_new(md, "kernelspec", spec);
}

static void
s_event(const nb_run_opts_t *o, const nb_run_event_t *ev)
{
    if (o->on_cell)
        o->on_cell(ev, o->arg);
}

/* Record how the execution of cell `i` ended and decide whether the run
 * stops. Returns the stop code (ERR_OK to go on) and sets *status. */
static int
s_settle(json_t *cell, size_t i, int rc, const err_t *xerr, kb_output_t *out,
         bool may_raise, const char **status, nb_run_result_t *res, err_t *err)
{
    if (rc == 0) {
        const char *st = kb_output_status(out);
        if (!st || strcmp(st, "error") != 0) {
            *status = "ok";
            return ERR_OK;
        }
        *status = "error";
        res->errors++;
        if (may_raise)
            return ERR_OK;
        json_t *e = s_first_error(json_object_get(cell, "outputs"));
        const char *ename = json_string_value(json_object_get(e, "ename"));
        const char *evalue = json_string_value(json_object_get(e, "evalue"));
        /* The kernel names the error: escaped before anyone prints it. */
        char *en = esc_dup(ename ? ename : "an error", ESC_NAME);
        char *ev = esc_dup(evalue ? evalue : "", ESC_NAME);
        err_set(err, ERR_USER_CODE, "cell %zu raised %s%s%.300s", i + 1, en,
                *ev ? ": " : "", ev);
        free(en);
        free(ev);
        return ERR_USER_CODE;
    }
    switch (xerr->code) {
    case ERR_TIMEOUT: {
        *status = "timeout";
        char *v = xasprintf("Cell execution %s", xerr->text);
        s_append_output(cell, s_error_output("CellTimeoutError", v));
        free(v);
        err_set(err, ERR_TIMEOUT, "cell %zu %s; raise --timeout", i + 1,
                xerr->text);
        return ERR_TIMEOUT;
    }
    case ERR_INTERRUPTED:
        *status = "interrupted";
        if (!s_first_error(json_object_get(cell, "outputs"))) {
            char *v = xasprintf("%s (the run was stopped here)", xerr->text);
            s_append_output(cell, s_error_output("KeyboardInterrupt", v));
            free(v);
        }
        err_set(err, ERR_INTERRUPTED, "cell %zu %s; the run was stopped", i + 1,
                xerr->text);
        return ERR_INTERRUPTED;
    default: {
        *status = "died";
        const char *why = kb_output_death_reason(out);
        char *v = xasprintf("the kernel died while running this cell: %s",
                            why ? why : xerr->text);
        s_append_output(cell, s_error_output("DeadKernelError", v));
        free(v);
        err_set(err, ERR_KERNEL, "cell %zu: %s", i + 1, xerr->text);
        return ERR_KERNEL;
    }
    }
}

int
nb_run_notebook(nb_notebook_t *nb, kb_kernel_t *k, const nb_run_opts_t *o,
                nb_run_result_t *res, err_t *err)
{
    nb_run_opts_t defaults;
    if (!o) {
        nb_run_opts_init(&defaults);
        o = &defaults;
    }
    const char *skip = o->skip_tag ? o->skip_tag : DEFAULT_SKIP_TAG;
    size_t ncells = nb_notebook_ncells(nb);
    int64_t t0 = clock_mono_ms();
    kb_displays_t *displays = kb_displays_new();
    run_ctx_t ctx = {.outer = &o->hooks};
    kb_exec_hooks_t hooks = {
        .on_iopub = s_on_iopub, .should_stop = s_should_stop, .arg = &ctx};

    memset(res, 0, sizeof *res);
    res->stopped_at = -1;
    clock_iso8601_now(res->started, sizeof res->started);
    s_set_kernel_metadata(nb, k);
    /* The cells that will run look never executed from the start, so a
     * copy written between cells (run's crash-safe rewrites) never shows
     * a fresh output next to a stale one; the end result is the same, as
     * each cell is cleared before it runs and a stop clears the rest. */
    for (size_t i = 0; i < ncells; i++) {
        json_t *cell = nb_notebook_cell(nb, i);
        if (!s_runnable(cell, skip))
            continue;
        res->total++;
        json_object_set_new(cell, "outputs", json_array());
        json_object_set_new(cell, "execution_count", json_null());
        json_object_del(s_cell_metadata(cell), "execution");
    }

    for (size_t i = 0; i < ncells && res->code == ERR_OK; i++) {
        json_t *cell = nb_notebook_cell(nb, i);
        if (o->replay_session && s_is_reset(cell)) {
            err_t rerr = {0};
            if (kb_kernel_restart(k, &rerr) < 0) {
                res->code = ERR_KERNEL;
                res->stopped_at = (long)i;
                err_set(err, ERR_KERNEL,
                        "cell %zu: the recorded reset could not restart the "
                        "kernel: %s",
                        i + 1, rerr.text);
                s_clear_from(nb, i);
                break;
            }
            continue;
        }
        if (!s_runnable(cell, skip))
            continue;
        if (s_should_stop(&ctx)) { /* between cells: nothing to interrupt */
            res->code = ERR_INTERRUPTED;
            res->stopped_at = (long)i;
            err_set(err, ERR_INTERRUPTED,
                    "interrupted before cell %zu; the run was stopped", i + 1);
            s_clear_from(nb, i);
            break;
        }
        nb_run_event_t ev = {
            .cell = i, .ordinal = res->executed + 1, .total = res->total};
        s_event(o, &ev);

        bool may_raise = o->allow_errors || s_has_tag(cell, RAISES_TAG);
        kb_exec_opts_t xopts;
        kb_exec_opts_init(&xopts);
        xopts.store_history = true;
        xopts.allow_stdin = false;
        xopts.stop_on_error = !may_raise;

        kb_output_t *out = kb_output_new(displays, o->max_output_bytes);
        kb_output_merge_streams(out, o->merge_streams);
        json_object_set_new(s_cell_metadata(cell), "execution", json_object());
        json_object_set(cell, "outputs", kb_output_outputs(out));
        ctx.cell = cell;
        int64_t c0 = clock_mono_ms();
        err_t xerr = {0};
        int timeout_ms = o->replay_session
                             ? s_recorded_timeout(cell, o->timeout_ms)
                             : o->timeout_ms;
        int rc = kb_kernel_execute(k, nb_cell_source(cell), &xopts, timeout_ms,
                                   out, &hooks, &xerr);
        if (kb_output_status(out)) {
            char iso[40];
            clock_iso8601_now(iso, sizeof iso);
            s_set_timing(cell, "shell.execute_reply", iso);
        }
        kb_output_outputs(out); /* flush pending stream text */
        res->executed++;
        json_object_set_new(cell, "execution_count",
                            json_integer((json_int_t)res->executed));

        ev.done = true;
        ev.duration_ms = clock_mono_ms() - c0;
        res->code =
            s_settle(cell, i, rc, &xerr, out, may_raise, &ev.status, res, err);
        if (res->code == ERR_TIMEOUT && o->replay_session &&
            s_tool_cell(cell)) {
            /* The session went on after it, and recorded the limit as an
             * agent session's tools do: a note on stderr, not nbclient's
             * CellTimeoutError (which s_settle just appended). */
            json_t *outs = json_object_get(cell, "outputs");
            size_t n = json_array_size(outs);
            if (n)
                json_array_remove(outs, n - 1);
            char *note = xasprintf("[jupyter-agent] %s\n", xerr.text);
            s_append_output(cell, json_pack("{s:s, s:s, s:s}", "output_type",
                                            "stream", "name", "stderr", "text",
                                            note));
            free(note);
            res->code = ERR_OK;
            err_clear(err);
        }
        kb_output_destroy(&out); /* the cell keeps the outputs */
        s_event(o, &ev);
        if (res->code != ERR_OK) {
            res->stopped_at = (long)i;
            s_clear_from(nb, i + 1);
        }
    }
    kb_displays_destroy(&displays);
    res->duration_ms = clock_mono_ms() - t0;
    clock_iso8601_now(res->finished, sizeof res->finished);
    return res->code == ERR_OK ? 0 : -1;
}

json_t *
nb_run_result_json(const nb_run_result_t *res)
{
    const char *status;
    switch (res->code) {
    case ERR_OK:
        status = "ok";
        break;
    case ERR_USER_CODE:
        status = "error";
        break;
    case ERR_TIMEOUT:
        status = "timeout";
        break;
    case ERR_INTERRUPTED:
        status = "interrupted";
        break;
    default:
        status = "died";
        break;
    }
    json_t *j =
        json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:I}", "started",
                  res->started, "finished", res->finished, "duration_ms",
                  (json_int_t)res->duration_ms, "status", status,
                  "cells_executed", (json_int_t)res->executed, "cells_total",
                  (json_int_t)res->total, "errors", (json_int_t)res->errors);
    json_object_set_new(j, "stopped_at_cell",
                        res->stopped_at >= 0
                            ? json_integer((json_int_t)res->stopped_at + 1)
                            : json_null());
    return j;
}

/* --- parameters -------------------------------------------------------- */

/* Python's str.strip() bounds over `s` (valid or not UTF-8). */
static void
s_py_strip(const char *s, size_t *begin, size_t *end)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), i = 0, b = len, e = 0;
    while (i < len) {
        size_t at = i;
        if (!s_py_space(utf8_decode(u, len, &i))) {
            if (b == len)
                b = at;
            e = i;
        }
    }
    *begin = b < len ? b : 0;
    *end = b < len ? e : 0;
}

/* Digits with single underscores between them, from s[*i] to at most e.
 * Appends the digits (no underscores) to `out`; returns how many. */
static size_t
s_digits(const char *s, size_t *i, size_t e, buf_t *out)
{
    size_t n = 0;
    while (*i < e) {
        if (isdigit((unsigned char)s[*i])) {
            buf_append(out, s + *i, 1);
            n++, (*i)++;
        } else if (s[*i] == '_' && n > 0 && *i + 1 < e &&
                   isdigit((unsigned char)s[*i + 1])) {
            (*i)++;
        } else {
            break;
        }
    }
    return n;
}

/* int(value): the normalised decimal text, or NULL. */
static char *
s_py_int(const char *s, size_t b, size_t e)
{
    buf_t d;
    buf_init(&d, 0);
    size_t i = b;
    bool neg = false;
    if (i < e && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (s_digits(s, &i, e, &d) == 0 || i != e) {
        buf_release(&d);
        return NULL;
    }
    const char *p = buf_cstr(&d);
    while (p[0] == '0' && p[1])
        p++;
    char *r = xasprintf("%s%s", neg && strcmp(p, "0") ? "-" : "", p);
    buf_release(&d);
    return r;
}

/* float(value): 0 with *v set, or -1 if Python would refuse it. */
static int
s_py_float(const char *s, size_t b, size_t e, double *v)
{
    buf_t t;
    buf_init(&t, 0);
    size_t i = b;
    int rc = -1;
    if (i < e && (s[i] == '+' || s[i] == '-'))
        buf_append(&t, s + i++, 1);
    static const char *const words[] = {"infinity", "inf", "nan"};
    for (size_t w = 0; w < 3; w++) {
        size_t n = strlen(words[w]);
        if (e - i == n && strncasecmp(s + i, words[w], n) == 0) {
            buf_puts(&t, words[w]);
            i = e;
            goto convert;
        }
    }
    size_t whole = s_digits(s, &i, e, &t), frac = 0;
    if (i < e && s[i] == '.') {
        buf_append(&t, ".", 1);
        i++;
        frac = s_digits(s, &i, e, &t);
    }
    if (whole + frac == 0)
        goto out;
    if (i < e && (s[i] == 'e' || s[i] == 'E')) {
        buf_append(&t, "e", 1);
        i++;
        if (i < e && (s[i] == '+' || s[i] == '-'))
            buf_append(&t, s + i++, 1);
        if (s_digits(s, &i, e, &t) == 0)
            goto out;
    }
convert:
    if (i != e)
        goto out;
    errno = 0;
    *v = strtod(buf_cstr(&t), NULL); /* ERANGE: inf or 0, as Python */
    rc = 0;
out:
    buf_release(&t);
    return rc;
}

/* "..." as papermill writes a str: unicode_escape, then '"' -> '\"'. */
static char *
s_py_str(const char *value)
{
    const unsigned char *u = (const unsigned char *)value;
    size_t len = strlen(value), i = 0;
    buf_t b;
    buf_init(&b, 0);
    buf_append(&b, "\"", 1);
    while (i < len) {
        long cp = utf8_decode(u, len, &i);
        if (cp < 0)
            cp = 0xdc00 + (-1 - cp); /* surrogateescape */
        if (cp >= 0x10000)
            buf_printf(&b, "\\U%08lx", cp);
        else if (cp >= 0x100)
            buf_printf(&b, "\\u%04lx", cp);
        else if (cp == '\\')
            buf_puts(&b, "\\\\");
        else if (cp == '\t')
            buf_puts(&b, "\\t");
        else if (cp == '\n')
            buf_puts(&b, "\\n");
        else if (cp == '\r')
            buf_puts(&b, "\\r");
        else if (cp < 0x20 || cp >= 0x7f)
            buf_printf(&b, "\\x%02lx", cp);
        else if (cp == '"')
            buf_puts(&b, "\\\"");
        else
            buf_printf(&b, "%c", (int)cp);
    }
    buf_append(&b, "\"", 1);
    return buf_detach(&b, NULL);
}

char *
nb_param_literal(const char *value, json_t **typed)
{
    json_t *j = NULL;
    char *lit = NULL, *n;
    size_t b, e;
    double d;

    s_py_strip(value, &b, &e);
    if (strcmp(value, "True") == 0 || strcmp(value, "False") == 0) {
        lit = xstrdup(value);
        j = json_boolean(value[0] == 'T');
    } else if (strcmp(value, "None") == 0) {
        lit = xstrdup(value);
        j = json_null();
    } else if ((n = s_py_int(value, b, e)) != NULL) {
        lit = n;
        errno = 0;
        long long ll = strtoll(n, NULL, 10);
        j = errno ? json_string(n) : json_integer((json_int_t)ll);
    } else if (s_py_float(value, b, e, &d) == 0) {
        if (isfinite(d)) {
            char r[NB_JSON_FLOAT_SIZE];
            nb_json_repr_float(d, r);
            lit = xstrdup(r);
            j = json_real(d);
        } else {
            const char *w = isnan(d) ? "nan" : d < 0 ? "-inf" : "inf";
            lit = xasprintf("float('%s')", w);
            j = json_string(w);
        }
    } else {
        lit = s_py_str(value);
        j = json_string(value);
        if (!j) /* not UTF-8: keep what the literal says */
            j = json_string(lit);
    }
    if (typed)
        *typed = j;
    else
        json_decref(j);
    return lit;
}

bool
nb_param_name_valid(const char *name)
{
    static const char *const keywords[] = {
        "False",  "None",     "True",  "and",    "as",       "assert",
        "async",  "await",    "break", "class",  "continue", "def",
        "del",    "elif",     "else",  "except", "finally",  "for",
        "from",   "global",   "if",    "import", "in",       "is",
        "lambda", "nonlocal", "not",   "or",     "pass",     "raise",
        "return", "try",      "while", "with",   "yield"};
    if (!name || !(isalpha((unsigned char)name[0]) || name[0] == '_'))
        return false;
    for (const char *p = name; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_') ||
            (unsigned char)*p >= 0x80)
            return false;
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
        if (strcmp(name, keywords[i]) == 0)
            return false;
    return true;
}

static long
s_find_tagged(const nb_notebook_t *nb, const char *tag)
{
    for (size_t i = 0; i < nb_notebook_ncells(nb); i++)
        if (s_has_tag(nb_notebook_cell(nb, i), tag))
            return (long)i;
    return -1;
}

long
nb_run_inject_parameters(nb_notebook_t *nb, const char *const *names,
                         const char *const *values, size_t n,
                         json_t **params_out, err_t *err)
{
    for (size_t i = 0; i < n; i++)
        if (!nb_param_name_valid(names[i]))
            return err_set(err, ERR_USAGE,
                           "-p %s: a parameter name must be a Python "
                           "identifier (letters, digits, _; not a keyword)",
                           names[i]);
    /* papermill keeps a dict: first position, last value. */
    json_t *order = json_object(); /* name -> index of its last value */
    json_t *params = json_object();
    json_t *first = json_array(); /* names in first-seen order */
    for (size_t i = 0; i < n; i++) {
        if (!json_object_get(order, names[i]))
            json_array_append_new(first, json_string(names[i]));
        json_object_set_new(order, names[i], json_integer((json_int_t)i));
    }
    buf_t src;
    buf_init(&src, 0);
    buf_puts(&src, "# Parameters\n");
    size_t k;
    json_t *jn;
    json_array_foreach(first, k, jn)
    {
        const char *name = json_string_value(jn);
        size_t vi = (size_t)json_integer_value(json_object_get(order, name));
        json_t *typed = NULL;
        char *lit = nb_param_literal(values[vi], &typed);
        buf_printf(&src, "%s = %s\n", name, lit);
        json_object_set_new(params, name, typed);
        free(lit);
    }
    json_t *cell = nb_cell_new_code(buf_cstr(&src));
    buf_release(&src);
    json_object_set_new(s_cell_metadata(cell), "tags",
                        json_pack("[s]", "injected-parameters"));

    long at = s_find_tagged(nb, "injected-parameters");
    json_t *cells = nb_notebook_cells(nb);
    bool replace = at >= 0;
    if (!replace) {
        long p = s_find_tagged(nb, "parameters");
        at = p >= 0 ? p + 1 : 0;
    }
    /* Append first, so the notebook hands out a unique id, then move. */
    json_incref(cell);
    nb_notebook_append(nb, cell);
    json_array_remove(cells, json_array_size(cells) - 1);
    if (replace)
        json_array_set_new(cells, (size_t)at, cell);
    else
        json_array_insert_new(cells, (size_t)at, cell);

    json_decref(order);
    json_decref(first);
    if (params_out)
        *params_out = params;
    else
        json_decref(params);
    return at;
}
