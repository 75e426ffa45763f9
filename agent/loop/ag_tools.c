#include "agent/loop/ag_tools.h"
#include "agent/loop/ag_chart.h"
#include "agent/loop/ag_image.h"
#include "agent/loop/ag_pysrc.h"
#include "agent/session/ag_outputs.h"

#include "agent/loop/ag_render.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/jget.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "sandbox/sb_sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table ----------------------------------------------------------- */

struct ag_tools {
    ag_tool_def_t *defs; /* owned array; the strings inside are borrowed */
    size_t n;            /* tools in defs */
    json_t *schemas;     /* owned cache of ag_tools_schemas, NULL = stale */
    char *workdir;       /* owned ag_tools_set_workdir, or NULL */
};

static int s_list_files(const ag_tool_env_t *env, const json_t *args,
                        void *tool_arg, ag_tool_result_t *res, err_t *err);

/* The built-in tools. install_packages (agent/loop/ag_packages_tool.h) is added
 * by ag_loop through ag_tools_add when the session has a signed manifest
 * (--packages), so a model is never offered a tool that cannot work. */
static const ag_tool_def_t s_builtin[] = {
    {"python", AG_TOOLS_PYTHON_DESCRIPTION,
     "{\"type\": \"object\", \"properties\": {" AG_TOOLS_PYTHON_CODE_SCHEMA
     "}, \"required\": [\"code\"], "
     "\"additionalProperties\": false}",
     ag_tools_python, NULL},
    {"list_files",
     "List the files in the workspace /mnt/data (including /mnt/data/out/) "
     "with their sizes.",
     "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": "
     "false}",
     s_list_files, NULL},
};

ag_tools_t *
ag_tools_new(void)
{
    ag_tools_t *t = xcalloc(1, sizeof *t);
    for (size_t i = 0; i < sizeof s_builtin / sizeof s_builtin[0]; i++)
        ag_tools_add(t, &s_builtin[i], NULL);
    return t;
}

void
ag_tools_destroy(ag_tools_t **p)
{
    if (!p || !*p)
        return;
    free((*p)->defs);
    free((*p)->workdir);
    json_decref((*p)->schemas);
    free(*p);
    *p = NULL;
}

static ag_tool_def_t *
s_find(ag_tools_t *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->defs[i].name, name) == 0)
            return &t->defs[i];
    return NULL;
}

int
ag_tools_add(ag_tools_t *t, const ag_tool_def_t *def, err_t *err)
{
    if (!def || !def->name || !*def->name || !def->description || !def->fn ||
        !def->parameters)
        return err_set(err, ERR_USAGE,
                       "a tool needs a name, a description, parameters and a "
                       "handler");
    json_t *schema = json_loads(def->parameters, 0, NULL);
    bool ok = json_is_object(schema);
    json_decref(schema);
    if (!ok)
        return err_set(err, ERR_USAGE,
                       "tool %s: its parameters are not a JSON Schema object",
                       def->name);
    ag_tool_def_t *old = s_find(t, def->name);
    if (old) {
        *old = *def;
    } else {
        t->defs = xrealloc(t->defs, (t->n + 1) * sizeof *t->defs);
        t->defs[t->n++] = *def;
    }
    json_decref(t->schemas);
    t->schemas = NULL;
    return 0;
}

void
ag_tools_set_workdir(ag_tools_t *t, const char *dir)
{
    free(t->workdir);
    t->workdir = dir ? xstrdup(dir) : NULL;
    json_decref(t->schemas);
    t->schemas = NULL;
}

/* `text` with every "/mnt/data" replaced by `dir`. New string. */
static char *
s_with_workdir(const char *text, const char *dir)
{
    static const char mnt[] = "/mnt/data";
    buf_t b;
    buf_init(&b, 0);
    const char *p = text, *hit;
    while ((hit = strstr(p, mnt))) {
        buf_append(&b, p, (size_t)(hit - p));
        buf_puts(&b, dir);
        p = hit + sizeof mnt - 1;
    }
    buf_puts(&b, p);
    char *r = xstrdup(buf_cstr(&b));
    buf_release(&b);
    return r;
}

char *
ag_tools_describe(const ag_tools_t *t, const char *text)
{
    return s_with_workdir(text, t->workdir ? t->workdir : "/mnt/data");
}

const json_t *
ag_tools_schemas(ag_tools_t *t)
{
    if (t->schemas)
        return t->schemas;
    t->schemas = json_array();
    for (size_t i = 0; i < t->n; i++) {
        char *desc = ag_tools_describe(t, t->defs[i].description);
        json_array_append_new(
            t->schemas, json_pack("{s:s, s:s, s:o}", "name", t->defs[i].name,
                                  "description", desc, "parameters",
                                  json_loads(t->defs[i].parameters, 0, NULL)));
        free(desc);
    }
    return t->schemas;
}

/* ---- results ------------------------------------------------------------- */

void
ag_tool_result_init(ag_tool_result_t *r)
{
    memset(r, 0, sizeof *r);
    r->execution_count = -1;
}

void
ag_tool_result_release(ag_tool_result_t *r)
{
    free(r->text);
    for (size_t i = 0; i < r->nimages; i++) {
        free((char *)r->images[i].mime);
        free((char *)r->images[i].data);
    }
    free(r->images);
    free(r->cell_source);
    free(r->status);
    json_decref(r->cell_outputs);
    json_decref(r->cell_meta);
    ag_tool_result_init(r);
}

static void s_set_text(ag_tool_result_t *res, bool is_error, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));

static void
s_set_text(ag_tool_result_t *res, bool is_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(res->text);
    res->text = xvasprintf(fmt, ap);
    va_end(ap);
    res->is_error = is_error;
}

const char *
ag_tools_human_size(long long bytes, char *buf, size_t size)
{
    if (bytes < 1024)
        snprintf(buf, size, "%lld B", bytes);
    else if (bytes < 1024LL * 1024)
        snprintf(buf, size, "%.1f KiB", bytes / 1024.0);
    else if (bytes < 1024LL * 1024 * 1024)
        snprintf(buf, size, "%.1f MiB", bytes / (1024.0 * 1024));
    else
        snprintf(buf, size, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
    return buf;
}

char *
ag_tools_truncate(const char *text, size_t budget)
{
    size_t len = strlen(text);
    if (len <= budget)
        return xstrdup(text);
    size_t head = budget / 2, tail = budget - head;
    /* Prefer whole lines when a newline is near the cut. */
    size_t h = utf8_char_start(text, head);
    for (size_t i = h; i > 0 && h - i < 256; i--)
        if (text[i - 1] == '\n') {
            h = i;
            break;
        }
    size_t t = utf8_char_start(text, len - tail);
    for (size_t i = t; i < len && i - t < 256; i++)
        if (text[i] == '\n') {
            t = i + 1;
            break;
        }
    if (t < h)
        t = h;
    return xasprintf("%.*s\n[… %zu bytes omitted …]\n%s", (int)h, text, t - h,
                     text + t);
}

/* Text of a mime bundle for the model: text/plain, else a note. */
static void
s_data_text(buf_t *b, json_t *data)
{
    const char *plain = json_string_value(json_object_get(data, "text/plain"));
    if (plain) {
        buf_puts(b, plain);
        if (*plain && plain[strlen(plain) - 1] != '\n')
            buf_puts(b, "\n");
        return;
    }
    const char *key;
    json_t *v;
    buf_puts(b, "[output without a text form:");
    json_object_foreach(data, key, v) buf_printf(b, " %s", key);
    buf_puts(b, "]\n");
}

/* Base64 without whitespace (nbformat may keep line breaks). New. */
static char *
s_b64_compact(const char *b64)
{
    char *out = xmalloc(strlen(b64) + 1), *w = out;
    for (const char *r = b64; *r; r++)
        if (*r != '\n' && *r != '\r' && *r != ' ')
            *w++ = *r;
    *w = '\0';
    return out;
}

/* An image output: attach it (within limits: per image, scaled down with
 * ag_image_fit when over the side or size limit; per result, a budget)
 * and say so in the text. The notebook keeps the image as it came. */
static void
s_image(ag_tool_result_t *res, const ag_tool_env_t *env, buf_t *b,
        const char *mime, const char *b64)
{
    size_t max = env->max_images ? env->max_images : AG_TOOLS_MAX_IMAGES;
    size_t max_b64 =
        env->max_image_bytes ? env->max_image_bytes : AG_TOOLS_MAX_IMAGE_B64;
    size_t budget =
        env->image_budget ? env->image_budget : AG_TOOLS_IMAGE_BUDGET_B64;
    unsigned side =
        env->max_image_side ? env->max_image_side : AG_TOOLS_MAX_IMAGE_SIDE;
    size_t used = 0;
    for (size_t i = 0; i < res->nimages; i++)
        used += strlen(res->images[i].data);
    size_t left = budget > used ? budget - used : 0;
    if (max_b64 > left)
        max_b64 = left;
    char *compact = s_b64_compact(b64);
    size_t len = 0;
    unsigned char *bin = ag_base64_decode(compact, &len);
    unsigned w = 0, h = 0;
    char dims[48] = "", note[160] = "";
    if (bin && ag_png_size(bin, len, &w, &h) == 0)
        snprintf(dims, sizeof dims, " %ux%u", w, h);
    const char *kind = strcmp(mime, "image/png") == 0 ? "PNG" : "JPEG";
    err_t e = {0};
    if (bin && res->nimages < max && max_b64 >= 1024 && *kind == 'P') {
        unsigned char *small = NULL;
        size_t slen = 0;
        unsigned sw = 0, sh = 0;
        if (ag_image_fit(bin, len, side, max_b64 / 4 * 3, &small, &slen, &sw,
                         &sh, &e) == 0 &&
            small) {
            free(compact);
            compact = ag_base64_encode(small, slen);
            snprintf(note, sizeof note,
                     " scaled down to %ux%u for you (the notebook keeps the "
                     "full image)",
                     sw, sh);
            free(small);
        }
    }
    free(bin);
    if (!bin) {
        buf_printf(b, "[%s image with invalid base64 data, not attached]\n",
                   kind);
    } else if (res->nimages >= max) {
        buf_printf(b,
                   "[%s image%s not attached: at most %zu images per call]\n",
                   kind, dims, max);
    } else if (e.code) {
        buf_printf(b, "[%s image%s not attached: %s]\n", kind, dims, e.text);
    } else if (strlen(compact) > max_b64) {
        char sz[32];
        buf_printf(b,
                   "[%s image%s not attached: %s is over the %s left for "
                   "images in this result]\n",
                   kind, dims,
                   ag_tools_human_size((long long)len, sz, sizeof sz),
                   max_b64 == left ? "room" : "size limit");
    } else {
        res->images =
            xrealloc(res->images, (res->nimages + 1) * sizeof *res->images);
        res->images[res->nimages].mime = xstrdup(mime);
        res->images[res->nimages].data = compact;
        res->nimages++;
        buf_printf(b, "[image %zu: %s%s%s, attached]\n", res->nimages, kind,
                   dims, note);
        return;
    }
    free(compact);
}

/* The chart data of a figure (docs/outputs.md) as text: true when there
 * was some. */
static bool
s_chart_text(buf_t *b, const json_t *data)
{
    const json_t *chart = json_object_get(data, AG_OUTPUTS_CHART_MIME);
    if (!json_is_object(chart))
        return false;
    ag_chart_text(b, chart, AG_CHART_TEXT_BUDGET);
    return true;
}

static void
s_output_text(ag_tool_result_t *res, const ag_tool_env_t *env, buf_t *b,
              json_t *o)
{
    const char *type = json_string_value(json_object_get(o, "output_type"));
    if (!type)
        return;
    if (strcmp(type, "stream") == 0) {
        const char *text = json_string_value(json_object_get(o, "text"));
        if (text) {
            /* One long print takes at most half the result's text, as
             * head and tail, so what follows it still reaches the model. */
            size_t half =
                (env->text_budget ? env->text_budget : AG_TOOLS_TEXT_BUDGET) /
                2;
            char *s = ag_strip_ansi(xstrdup(text));
            char *cut = ag_tools_truncate(s, half);
            buf_puts(b, cut);
            free(cut);
            free(s);
        }
        return;
    }
    if (strcmp(type, "error") == 0) {
        json_t *tb = json_object_get(o, "traceback");
        size_t i;
        json_t *line;
        json_array_foreach(tb, i, line)
        {
            char *s = ag_strip_ansi(xstrdup(
                json_string_value(line) ? json_string_value(line) : ""));
            buf_puts(b, s);
            if (*s && s[strlen(s) - 1] != '\n')
                buf_puts(b, "\n");
            free(s);
        }
        const char *ename = json_string_value(json_object_get(o, "ename"));
        const char *evalue = json_string_value(json_object_get(o, "evalue"));
        /* The last traceback line usually says it; repeat it when not. */
        if (!json_array_size(tb))
            buf_printf(b, "%s: %s\n", ename ? ename : "Error",
                       evalue ? evalue : "");
        return;
    }
    json_t *data = json_object_get(o, "data");
    static const char *const images[] = {"image/png", "image/jpeg"};
    for (size_t i = 0; i < 2; i++) {
        const char *b64 = json_string_value(json_object_get(data, images[i]));
        if (b64) {
            s_image(res, env, b, images[i], b64);
            s_chart_text(b, data);
            return;
        }
    }
    /* An SVG figure is in the notebook, but models take PNG and JPEG only:
     * say so rather than show "<Figure size ...>" alone. */
    if (json_object_get(data, "image/svg+xml"))
        buf_puts(b, "[an image/svg+xml figure: kept in the notebook, not "
                    "shown to you (images reach you as PNG or JPEG; for "
                    "matplotlib, set_matplotlib_formats('png'))]\n");
    if (s_chart_text(b, data))
        return;
    const json_t *table = json_object_get(data, AG_OUTPUTS_TABLE_MIME);
    if (json_is_object(table)) {
        ag_table_text(b, table, AG_TABLE_TEXT_BUDGET);
        return;
    }
    s_data_text(b, data);
}

void
ag_tools_result_from_exec(ag_tool_result_t *res, const ag_tool_env_t *env,
                          const char *source, kb_output_t *out, int rc,
                          const err_t *xerr, const char *restarted_note)
{
    buf_t b;
    buf_init(&b, 0);
    json_t *outputs = kb_output_outputs(out), *o;
    size_t i;
    bool raised = false;
    json_array_foreach(outputs, i, o)
    {
        s_output_text(res, env, &b, o);
        const char *type = json_string_value(json_object_get(o, "output_type"));
        if (type && strcmp(type, "error") == 0)
            raised = true;
    }
    /* The notebook cell: the same outputs (shared, so display updates
     * still reach them) plus a status output. */
    json_t *cell_outputs = json_copy(outputs);
    const char *status = NULL;
    if (rc != 0) {
        int code = xerr ? xerr->code : ERR_KERNEL;
        const char *why = xerr && xerr->text[0] ? xerr->text : "failed";
        char *msg;
        if (code == ERR_KERNEL)
            msg = xasprintf("%s%s%s", why, restarted_note ? "; " : "",
                            restarted_note ? restarted_note : "");
        else if (code == ERR_INTERRUPTED)
            msg = xstrdup("interrupted by the user");
        else
            msg = xstrdup(why);
        if (code == ERR_KERNEL) {
            json_array_append_new(
                cell_outputs, json_pack("{s:s, s:s, s:s, s:[]}", "output_type",
                                        "error", "ename", "DeadKernelError",
                                        "evalue", msg, "traceback"));
        } else {
            char *note = xasprintf("[jupyter-agent] %s\n", msg);
            json_array_append_new(cell_outputs,
                                  json_pack("{s:s, s:s, s:s}", "output_type",
                                            "stream", "name", "stderr", "text",
                                            note));
            free(note);
        }
        buf_printf(&b, "%s[%s]\n",
                   b.len && b.data[b.len - 1] != '\n' ? "\n" : "", msg);
        status = "failed";
        free(res->status);
        res->status = msg;
    } else if (kb_output_truncated(out)) {
        buf_puts(&b, "[the output was cut by the output cap]\n");
    }
    if (b.len == 0)
        buf_puts(&b, "(no output)\n");
    size_t budget = env->text_budget ? env->text_budget : AG_TOOLS_TEXT_BUDGET;
    free(res->text);
    res->text = ag_tools_truncate(buf_cstr(&b), budget);
    buf_release(&b);
    res->is_error = raised || status != NULL;
    free(res->cell_source);
    res->cell_source = xstrdup(source);
    json_decref(res->cell_outputs);
    res->cell_outputs = cell_outputs;
    res->execution_count = kb_output_execution_count(out);
    res->duration_ms = kb_output_duration_ms(out);
}

/* ---- python -------------------------------------------------------------- */

/* The workspace's files (sandboxed sessions), or NULL. New reference. */
static json_t *
s_workspace_files(const ag_tool_env_t *env)
{
    ag_session_t *s = env->session ? env->session(env->arg) : NULL;
    sb_sandbox_t *box = s ? ag_session_sandbox(s) : NULL;
    return box ? sb_sandbox_list_files(box, 10000) : NULL;
}

/* Is every {path, size} of `a` in `b`? */
static bool
s_subset(const json_t *a, const json_t *b)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(a, i, x)
    {
        bool found = false;
        json_array_foreach(b, j, y) if (json_equal(x, y)) found = true;
        if (!found)
            return false;
    }
    return true;
}

int
ag_tools_python(const ag_tool_env_t *env, const json_t *args, void *tool_arg,
                ag_tool_result_t *res, err_t *err)
{
    (void)tool_arg;
    json_t *code = json_object_get(args, "code");
    if (!json_is_string(code)) {
        s_set_text(res, true,
                   "error: the python tool needs {\"code\": \"...\"} with the "
                   "code as a string%s",
                   code ? "" : " (no \"code\" was given)");
        return 0;
    }
    const char *src = json_string_value(code);
    kb_output_t *out = kb_output_new(env->displays, env->max_output_bytes);
    kb_output_merge_streams(out, true); /* read as text, whole */
    err_t xerr = {0};
    clock_iso8601_now(res->start_iso, sizeof res->start_iso);
    int64_t t0 = clock_mono_ms();
    int rc = env->run_python(env->arg, src, out, &xerr);
    if (kb_output_duration_ms(out) <= 0)
        kb_output_set_duration_ms(out, clock_mono_ms() - t0);
    clock_iso8601_now(res->end_iso, sizeof res->end_iso);
    int ret = 0;
    char *note = NULL;
    if (rc != 0 && xerr.code == ERR_KERNEL) {
        json_t *before = s_workspace_files(env);
        if (env->restart) {
            err_t rerr = {0};
            if (env->restart(env->arg, &rerr) == 0) {
                res->kernel_restarted = true;
                json_t *after = s_workspace_files(env);
                note = xasprintf(
                    "a fresh kernel was started: variables and imports are "
                    "gone%s; re-run what you need",
                    !before ? ""
                    : s_subset(before, after)
                        ? ", files in /mnt/data were kept"
                        : ", and /mnt/data was reset to the input files");
                json_decref(after);
            } else {
                note = xasprintf("no fresh kernel could be started: %s",
                                 rerr.text);
                ret = err_set(err, ERR_KERNEL,
                              "the kernel died (%s) and could not be "
                              "restarted: %s",
                              kb_output_death_reason(out)
                                  ? kb_output_death_reason(out)
                                  : "no reason given",
                              rerr.text);
            }
        }
        json_decref(before);
    } else if (rc != 0 && xerr.code == ERR_INTERRUPTED) {
        ret = err_set(err, ERR_INTERRUPTED, "interrupted by the user");
    }
    ag_tools_result_from_exec(res, env, src, out, rc, &xerr, note);
    free(note);
    kb_output_destroy(&out);
    return ret;
}

/* ---- list_files ---------------------------------------------------------- */

static json_t *
s_list_in_kernel(ag_session_t *s, char **where)
{
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.store_history = false;
    kb_output_t *out = kb_output_new(NULL, 1 << 20);
    kb_output_merge_streams(out, true); /* read as text, whole */
    json_t *files = NULL;
    /* Unsandboxed sessions: ag_list_files.py lists from inside. */
    char *code = xasprintf("%s\n__ja_ls(); del __ja_ls\n", ag_list_files_py);
    int rc = kb_kernel_execute(ag_session_kernel(s), code, &xo, 10000, out,
                               NULL, NULL);
    free(code);
    if (rc == 0) {
        json_t *o = json_array_get(kb_output_outputs(out), 0);
        json_t *j = json_loads(jget_str(o, "text", ""), 0, NULL);
        if (json_is_array(json_object_get(j, "files"))) {
            files = json_incref(json_object_get(j, "files"));
            *where = xstrdup(jget_str(j, "cwd", "the working directory"));
        }
        json_decref(j);
    }
    kb_output_destroy(&out);
    return files;
}

static int
s_list_files(const ag_tool_env_t *env, const json_t *args, void *tool_arg,
             ag_tool_result_t *res, err_t *err)
{
    (void)args;
    (void)tool_arg;
    (void)err;
    ag_session_t *s = env->session ? env->session(env->arg) : NULL;
    sb_sandbox_t *box = s ? ag_session_sandbox(s) : NULL;
    char *where = NULL;
    json_t *files = NULL;
    if (box) {
        files = sb_sandbox_list_files(box, 500);
        where = xstrdup("/mnt/data");
    } else if (s) {
        files = s_list_in_kernel(s, &where);
    }
    if (!files) {
        s_set_text(res, true, "error: there is no workspace to list");
        free(where);
        return 0;
    }
    buf_t b;
    buf_init(&b, 0);
    long long total = 0;
    size_t i, width = 0;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        size_t n = strlen(jget_str(f, "path", ""));
        if (n > width)
            width = n;
        total += json_integer_value(json_object_get(f, "size"));
    }
    char sz[32];
    buf_printf(&b, "%s: %zu file%s, %s\n", where, json_array_size(files),
               json_array_size(files) == 1 ? "" : "s",
               ag_tools_human_size(total, sz, sizeof sz));
    json_array_foreach(files, i, f)
    {
        buf_printf(
            &b, "  %-*s  %s\n", (int)width, jget_str(f, "path", "?"),
            ag_tools_human_size(json_integer_value(json_object_get(f, "size")),
                                sz, sizeof sz));
    }
    res->text = buf_detach(&b, NULL);
    res->cell_source =
        xasprintf("# list_files: the files in %s (listed by jupyter-agent "
                  "itself; nothing ran in the kernel)",
                  where);
    res->cell_outputs = json_pack("[{s:s, s:s, s:s}]", "output_type", "stream",
                                  "name", "stdout", "text", res->text);
    json_decref(files);
    free(where);
    return 0;
}

/* ---- dispatch ------------------------------------------------------------ */

int
ag_tools_call(ag_tools_t *t, const ag_tool_env_t *env,
              const ag_tool_call_t *call, ag_tool_result_t *res, err_t *err)
{
    ag_tool_def_t *d = s_find(t, call->name);
    if (!d) {
        buf_t names;
        buf_init(&names, 0);
        for (size_t i = 0; i < t->n; i++)
            buf_printf(&names, "%s%s", i ? ", " : "", t->defs[i].name);
        s_set_text(res, true,
                   "error: there is no tool named \"%s\"; the tools "
                   "are: %s",
                   call->name, buf_cstr(&names));
        buf_release(&names);
        return 0;
    }
    json_error_t jerr;
    const char *text =
        call->arguments && *call->arguments ? call->arguments : "{}";
    json_t *args = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(args)) {
        if (args)
            s_set_text(res, true,
                       "error: the arguments of %s must be a JSON object; "
                       "nothing was run",
                       call->name);
        else
            s_set_text(res, true,
                       "error: the arguments of %s are not valid JSON (%s, "
                       "at character %d); nothing was run",
                       call->name, jerr.text, jerr.position);
        json_decref(args);
        return 0;
    }
    int rc = d->fn(env, args, d->arg, res, err);
    json_decref(args);
    if (!res->text)
        res->text = xstrdup("(no output)");
    return rc;
}
