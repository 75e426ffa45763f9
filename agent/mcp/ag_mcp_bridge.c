/* python, list_files, install_packages: the loop's tools (agent/loop/
 * ag_tools.h) run against an MCP box's session (see ag_mcp_tools_impl.h). */
#include "agent/mcp/ag_mcp_tools_impl.h"

#include "agent/loop/ag_packages_tool.h"
#include "agent/loop/ag_render.h"
#include "common/clock.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* Progress lines sent per call at most, and bytes per line. */
#define MAX_PROGRESS_LINES 1000
#define MAX_PROGRESS_LINE 1000

static ag_session_t *
s_env_session(void *arg)
{
    return ag_mcp_box_session(arg, NULL);
}

static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    ag_mcp_box_t *b = arg;
    if (!b->call || !b->call->progress || strcmp(kb_msg_type(msg), "stream"))
        return;
    const char *text =
        json_string_value(json_object_get(kb_msg_content(msg), "text"));
    while (text && *text && b->progress_sent < MAX_PROGRESS_LINES) {
        size_t n = strcspn(text, "\n");
        if (n) {
            char *line =
                xstrndup(text, n < MAX_PROGRESS_LINE ? n : MAX_PROGRESS_LINE);
            b->call->progress(b->call->arg, ag_strip_ansi(line));
            free(line);
            b->progress_sent++;
        }
        text += n + (text[n] == '\n');
    }
}

static bool
s_should_stop(void *arg)
{
    ag_mcp_box_t *b = arg;
    /* --max-lifetime holds while a cell runs too. */
    int64_t life = b->cfg->session->max_lifetime_ms;
    if (!b->stopped && b->session && life > 0 &&
        clock_mono_ms() - b->started_ms > life)
        b->stopped = b->outlived = true;
    if (!b->stopped && b->call && b->call->should_stop &&
        b->call->should_stop(b->call->arg))
        b->stopped = true;
    return b->stopped;
}

static int
s_run_python(void *arg, const char *code, kb_output_t *out, err_t *err)
{
    ag_mcp_box_t *b = arg;
    b->status = "failed";
    ag_session_t *s = ag_mcp_box_session(b, err);
    if (!s)
        return -1;
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    /* One cell at a time, so nothing queued is to be aborted; with
     * stop_on_error ipykernel aborts the next request that arrives soon
     * after an error (a cell sent right after a cancelled one came back
     * "aborted", never run). */
    xo.stop_on_error = false;
    kb_exec_hooks_t hooks = {
        .on_iopub = s_on_iopub, .should_stop = s_should_stop, .arg = b};
    int rc = kb_kernel_execute(ag_session_kernel(s), code, &xo, b->timeout_ms,
                               out, &hooks, err);
    json_t *j = kb_output_to_json(out);
    static const char *const known[] = {"ok", "error", "timeout", "interrupted",
                                        "died"};
    const char *st = json_string_value(json_object_get(j, "status"));
    for (size_t i = 0; st && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(st, known[i]) == 0)
            b->status = known[i];
    json_decref(j);
    return rc;
}

static int
s_restart(void *arg, err_t *err)
{
    ag_mcp_box_t *b = arg;
    return b->session ? kb_kernel_restart(ag_session_kernel(b->session), err)
                      : err_set(err, ERR_KERNEL, "no session is running");
}

static void
s_record(ag_mcp_box_t *b, const char *tool, const ag_tool_result_t *res)
{
    if (!res->cell_source || !res->cell_outputs)
        return;
    json_t *cell = nb_record_add_code(b->record, res->cell_source,
                                      res->cell_outputs, res->execution_count,
                                      res->start_iso[0] ? res->start_iso : NULL,
                                      res->end_iso[0] ? res->end_iso : NULL);
    json_t *md = cell ? json_object_get(cell, "metadata") : NULL;
    if (!json_is_object(md))
        return;
    json_t *ja = json_pack("{s:s, s:s}", "tool", tool, "via", "mcp");
    /* The call's own limit, which 'archive rerun' replays. */
    if (strcmp(tool, "python") == 0 && b->timeout_ms > 0)
        json_object_set_new(ja, "timeout_s", json_real(b->timeout_ms / 1000.0));
    json_object_set_new(md, "jupyter_agent", ja);
}

/* Run one of ag_tools' tools and turn its result into MCP content. */
static json_t *
s_delegate(ag_mcp_box_t *b, const char *name, const json_t *args,
           bool structured)
{
    char *text = json_dumps(args, JSON_COMPACT);
    ag_tool_call_t tc = {.id = "mcp", .name = name, .arguments = text};
    ag_tool_result_t res;
    ag_tool_result_init(&res);
    err_t err = {0};
    int rc = ag_tools_call(b->tools, &b->env, &tc, &res, &err);
    free(text);
    s_record(b, name, &res);
    json_t *content = json_array();
    json_array_append_new(
        content, json_pack("{s:s, s:s}", "type", "text", "text", res.text));
    for (size_t i = 0; i < res.nimages; i++)
        json_array_append_new(content,
                              json_pack("{s:s, s:s, s:s}", "type", "image",
                                        "data", res.images[i].data, "mimeType",
                                        res.images[i].mime));
    /* An execution that did not end "ok" is an error for the client too
     * (an "aborted" reply carries no error output of its own). */
    bool failed = structured && strcmp(b->status, "ok") != 0;
    json_t *r = json_pack("{s:o, s:b}", "content", content, "isError",
                          res.is_error || rc != 0 || failed);
    if (structured) {
        json_t *outputs =
            res.cell_outputs ? json_incref(res.cell_outputs) : json_array();
        json_t *count = res.execution_count >= 0
                            ? json_integer(res.execution_count)
                            : json_null();
        json_object_set_new(r, "structuredContent",
                            json_pack("{s:s, s:o, s:o}", "status", b->status,
                                      "execution_count", count, "outputs",
                                      outputs));
    }
    ag_tool_result_release(&res);
    return r;
}

/* ---- the tools -------------------------------------------------------- */

typedef json_t *(*s_tool_fn)(ag_mcp_box_t *b, const json_t *args);

json_t *
ag_mcp_tool_python(ag_mcp_box_t *b, const json_t *args)
{
    json_t *t = json_object_get(args, "timeout");
    b->timeout_ms = b->cfg->session->timeout_ms;
    if (t) {
        double secs = json_number_value(t);
        if (!json_is_number(t) || secs <= 0 || secs > AG_MCP_MAX_TIMEOUT_S)
            return ag_mcp_text_result(
                true,
                "error: timeout must be a number of seconds "
                "above 0 and at most %d; nothing was run",
                AG_MCP_MAX_TIMEOUT_S);
        b->timeout_ms = (int)(secs * 1000);
        /* The operator's --timeout is a limit: a client may ask for less,
         * not more (--timeout 0 lets clients choose up to the maximum). */
        int cap = b->cfg->session->timeout_ms;
        if (cap > 0 && b->timeout_ms > cap)
            b->timeout_ms = cap;
    }
    if (!json_is_string(json_object_get(args, "code")))
        return ag_mcp_text_result(true,
                                  "error: python needs {\"code\": \"...\"} "
                                  "with the code as a string; nothing was "
                                  "run");
    b->status = "failed";
    json_t *r = s_delegate(b, "python", args, true);
    if (b->expired_note && b->session) {
        json_t *first = json_array_get(json_object_get(r, "content"), 0);
        char *t2 = xasprintf("[%s]\n%s", b->expired_note,
                             json_string_value(json_object_get(first, "text")));
        json_object_set_new(first, "text", json_string(t2));
        free(t2);
        free(b->expired_note);
        b->expired_note = NULL;
    }
    return r;
}

json_t *
ag_mcp_tool_list_files(ag_mcp_box_t *b, const json_t *args)
{
    return s_delegate(b, "list_files", args, false);
}

json_t *
ag_mcp_tool_install(ag_mcp_box_t *b, const json_t *args)
{
    return s_delegate(b, "install_packages", args, false);
}

void
ag_mcp_bridge_init(ag_mcp_box_t *b)
{
    const ag_mcp_config_t *cfg = b->cfg;
    b->tools = ag_tools_new();
    /* A kernel on a Jupyter server gets its private directory when the
     * session starts, after tools/list: the tools name it as the kernel's
     * current directory, which it is. */
    if (cfg->session->gateway_url)
        ag_tools_set_workdir(b->tools, ".");
    if (cfg->session->packages_dir) {
        static const ag_tool_def_t install = {
            "install_packages", AG_PACKAGES_TOOL_DESCRIPTION,
            AG_PACKAGES_TOOL_PARAMETERS, ag_packages_tool_fn, NULL};
        ag_tools_add(b->tools, &install, NULL);
    }
    b->env =
        (ag_tool_env_t){.run_python = s_run_python,
                        .restart = s_restart,
                        .session = s_env_session,
                        .arg = b,
                        .displays = b->displays,
                        .max_output_bytes = cfg->session->max_output_bytes};
}
