#include "agent/mcp/ag_mcp_tools.h"

#include "agent/loop/ag_packages_tool.h"
#include "agent/loop/ag_render.h"
#include "agent/loop/ag_tools.h"
#include "agent/mcp/ag_mcp_pysrc.h"
#include "agent/mcp/ag_mcp_shell.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/escape.h"
#include "common/log.h"
#include "common/version.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"
#include "notebook-io/nb_record.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Progress lines sent per call at most, and bytes per line. */
#define MAX_PROGRESS_LINES 1000
#define MAX_PROGRESS_LINE 1000

/* A file on the host, by identity: inode numbers are reused, and the
 * ctime (which no one can set) tells a new file from ours. */
typedef struct s_file_id {
    dev_t dev;
    ino_t ino;
    struct timespec ctime; /* after we moved it into place */
} s_file_id_t;

struct ag_mcp_box {
    const ag_mcp_config_t *cfg; /* borrowed */
    ag_session_t *session;      /* owned; NULL until the first call */
    ag_tools_t *tools;          /* owned: python, list_files[, install] */
    ag_tool_env_t env;          /* the tools' view of this box */
    kb_displays_t *displays;    /* owned: display ids across cells */
    nb_record_t *record;        /* owned: the session as a notebook */
    int64_t started_ms;         /* when the session started */
    int64_t used_ms;            /* when a call last ended */
    char *expired_note;         /* owned: why the last session stopped */
    int timeout_ms;             /* limit of the python call running */
    const char *status;         /* status of the last execution (static) */
    const ag_mcp_call_t *call;  /* the call running, borrowed; or NULL */
    bool stopped;               /* should_stop said yes during this call */
    bool outlived;              /* ... because of --max-lifetime */
    size_t progress_sent;       /* progress lines sent in this call */
    s_file_id_t *exported;      /* owned: files export_notebook wrote */
    size_t nexported;           /* entries in exported */
};

/* ---- the session ------------------------------------------------------ */

static void
s_stop_session(ag_mcp_box_t *b, const char *why)
{
    if (!b->session)
        return;
    log_info("mcp: stopping the session's kernel: %s", why);
    ag_session_destroy(&b->session);
    free(b->expired_note);
    b->expired_note = xasprintf("the previous kernel was stopped (%s): "
                                "variables and files are gone",
                                why);
}

void
ag_mcp_box_expire(ag_mcp_box_t *b)
{
    if (!b->session)
        return;
    const ag_session_opts_t *o = b->cfg->session;
    int64_t now = clock_mono_ms();
    if (o->idle_timeout_ms > 0 && now - b->used_ms > o->idle_timeout_ms)
        s_stop_session(b, "idle longer than --idle-timeout");
    else if (o->max_lifetime_ms > 0 && now - b->started_ms > o->max_lifetime_ms)
        s_stop_session(b, "older than --max-lifetime");
}

static ag_session_t *
s_session(ag_mcp_box_t *b, err_t *err)
{
    ag_mcp_box_expire(b);
    if (b->session)
        return b->session;
    b->session = ag_session_start(b->cfg->session, err);
    if (!b->session)
        return NULL;
    b->started_ms = b->used_ms = clock_mono_ms();
    ag_session_print_warnings(b->session, stderr);
    const char *w = ag_session_warnings(b->session);
    if (*w && b->call && b->call->log)
        b->call->log(b->call->arg, "warning", w);
    ag_session_record_kernel(b->session, b->record);
    return b->session;
}

static ag_session_t *
s_env_session(void *arg)
{
    return s_session(arg, NULL);
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
    ag_session_t *s = s_session(b, err);
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

/* ---- results ---------------------------------------------------------- */

static json_t *s_text_result(bool is_error, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static json_t *
s_text_result(bool is_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
                          "text", text, "isError", is_error);
    free(text);
    return r;
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

static json_t *
s_python(ag_mcp_box_t *b, const json_t *args)
{
    json_t *t = json_object_get(args, "timeout");
    b->timeout_ms = b->cfg->session->timeout_ms;
    if (t) {
        double secs = json_number_value(t);
        if (!json_is_number(t) || secs <= 0 || secs > AG_MCP_MAX_TIMEOUT_S)
            return s_text_result(true,
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
        return s_text_result(true, "error: python needs {\"code\": \"...\"} "
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

static json_t *
s_list_files(ag_mcp_box_t *b, const json_t *args)
{
    return s_delegate(b, "list_files", args, false);
}

static json_t *
s_shell(ag_mcp_box_t *b, const json_t *args)
{
    err_t err = {0};
    ag_session_t *s = s_session(b, &err);
    ag_mcp_shell_io_t io = {0};
    if (b->call)
        io = (ag_mcp_shell_io_t){b->call->progress, b->call->should_stop,
                                 b->call->arg};
    return ag_mcp_shell_call(s, err.text, b->cfg->session->timeout_ms, args,
                             &io, &b->stopped);
}

static json_t *
s_install(ag_mcp_box_t *b, const json_t *args)
{
    return s_delegate(b, "install_packages", args, false);
}

/* `path` as a path relative to /mnt/data, checked (sb_files rules);
 * through a gateway (`remote`), relative to the kernel's working
 * directory, where /mnt/data means nothing. */
static const char *
s_relpath(const char *path, bool remote, err_t *err)
{
    static const char prefix[] = SB_WORKSPACE_PATH "/";
    if (!path) {
        err_set(err, ERR_USAGE, "\"path\" must be a string");
        return NULL;
    }
    if (remote && path[0] == '/') {
        err_set(err, ERR_USAGE,
                "%s is absolute: give a path relative to the kernel's "
                "working directory on the Jupyter server",
                path);
        return NULL;
    }
    if (!remote && strncmp(path, prefix, sizeof prefix - 1) == 0)
        path += sizeof prefix - 1;
    else if (path[0] == '/') {
        err_set(err, ERR_USAGE,
                "%s is outside " SB_WORKSPACE_PATH
                ": only files in the workspace can be read or written",
                path);
        return NULL;
    }
    if (sb_files_check_relpath(path, err) < 0) {
        /* Its words name /mnt/data, which a remote kernel does not have. */
        if (remote)
            err_set(err, ERR_USAGE,
                    "'%s' is refused: give a path that stays inside the "
                    "kernel's working directory (no '..', no empty or '.' "
                    "component)",
                    path);
        return NULL;
    }
    return path;
}

/* The workspace as a directory fd: borrowed from the sandbox, or opened
 * (*owned) for a warm kernel's workspace. -1 + err when there is none. */
static int
s_workspace_fd(ag_session_t *s, bool *owned, err_t *err)
{
    *owned = false;
    sb_sandbox_t *box = ag_session_sandbox(s);
    if (box)
        return sb_sandbox_workspace_fd(box);
    const char *ws = ag_session_workspace(s);
    if (!ws)
        return err_set(err, ERR_USAGE,
                       "this session has no sandbox workspace (--no-sandbox)");
    int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, ERR_IO, "cannot open the workspace: %s",
                       strerror(errno));
    *owned = true;
    return fd;
}

static const char *
s_mime(const char *path)
{
    static const char *const map[][2] = {
        {".png", "image/png"},
        {".jpg", "image/jpeg"},
        {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},
        {".svg", "image/svg+xml"},
        {".pdf", "application/pdf"},
        {".zip", "application/zip"},
        {".ipynb", "application/x-ipynb+json"},
        {".json", "application/json"},
        {".csv", "text/csv"},
        {".parquet", "application/vnd.apache.parquet"},
        {".xlsx", "application/vnd.openxmlformats-officedocument."
                  "spreadsheetml.sheet"}};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof map / sizeof map[0]; i++)
        if (strcasecmp(dot, map[i][0]) == 0)
            return map[i][1];
    return "application/octet-stream";
}

static void
s_sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, data, len);
    sodium_bin2hex(hex, 65, h, sizeof h);
}

/* Through a gateway: `rel` in the session's private directory (known
 * since the kernel entered it: no round trip), else in the directory the
 * kernel reports, escaped for showing (a new string); *raw (may be NULL)
 * gets it as it is. NULL + err. */
static char *
s_kernel_path(ag_session_t *s, const char *rel, char **raw, err_t *err)
{
    const char *known = kb_kernel_workdir(ag_session_kernel(s));
    char *dir = known ? xstrdup(known)
                      : kb_files_kernel_dir(ag_session_kernel(s), NULL, err);
    if (!dir)
        return NULL;
    char *path = xasprintf("%s/%s", strcmp(dir, "/") ? dir : "", rel);
    free(dir);
    char *shown = esc_dup(path, ESC_NAME);
    if (raw)
        *raw = path;
    else
        free(path);
    return shown;
}

/* Read `rel` (checked) into *data and *len: from the local workspace, or
 * through the gateway kernel (kb_files: every chunk checked here). *shown
 * gets the path to show (a new string). 0, or -1 + err. */
static int
s_read_bytes(ag_mcp_box_t *b, const char *rel, char **data, size_t *len,
             char **shown, err_t *err)
{
    *data = NULL;
    *shown = NULL;
    ag_session_t *s = s_session(b, err);
    if (!s)
        return -1;
    if (b->cfg->session->gateway_url) {
        /* Read from the directory that is shown (the one write_file uses). */
        kb_files_opts_t fo;
        kb_files_opts_init(&fo);
        fo.kernel_dir = kb_kernel_workdir(ag_session_kernel(s));
        if (!(*shown = s_kernel_path(s, rel, NULL, err)))
            return -1;
        if (kb_files_read(ag_session_kernel(s), rel, AG_MCP_MAX_FILE, data, len,
                          &fo, err) < 0) {
            free(*shown);
            *shown = NULL;
            return -1;
        }
        return 0;
    }
    bool owned = false;
    int fd = s_workspace_fd(s, &owned, err);
    int rc =
        fd < 0 ? -1 : sb_files_read(fd, rel, AG_MCP_MAX_FILE, data, len, err);
    if (owned)
        close(fd);
    if (rc == 0)
        *shown = xasprintf(SB_WORKSPACE_PATH "/%s", rel);
    else
        *data = NULL;
    return rc < 0 ? -1 : 0;
}

static json_t *
s_read_file(ag_mcp_box_t *b, const json_t *args)
{
    err_t err = {0};
    const char *path = json_string_value(json_object_get(args, "path"));
    const char *rel = s_relpath(path, b->cfg->session->gateway_url, &err);
    char *data = NULL, *shown = NULL;
    size_t len = 0;
    if (!rel || s_read_bytes(b, rel, &data, &len, &shown, &err) < 0)
        return s_text_result(true, "error: read_file: %s", err.text);
    char hex[65];
    s_sha256_hex(data, len, hex);
    char *uri = xasprintf("file://%s", shown);
    json_t *text = memchr(data, '\0', len) ? NULL : json_stringn(data, len);
    json_t *item;
    if (text) {
        item = json_pack("{s:s, s:o}", "type", "text", "text", text);
    } else {
        size_t cap =
            sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
        char *b64 = xmalloc(cap);
        sodium_bin2base64(b64, cap, (const unsigned char *)data, len,
                          sodium_base64_VARIANT_ORIGINAL);
        item = json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "resource",
                         "resource", "uri", uri, "mimeType", s_mime(rel),
                         "blob", b64);
        free(b64);
    }
    char *note = xasprintf("%s: %zu bytes, %s, sha256 %s", shown, len,
                           text ? "text" : "binary (base64 blob)", hex);
    json_t *r = json_pack("{s:[o, {s:s, s:s}], s:b}", "content", item, "type",
                          "text", "text", note, "isError", 0);
    free(note);
    free(uri);
    free(shown);
    free(data);
    return r;
}

static json_t *
s_write_file(ag_mcp_box_t *b, const json_t *args)
{
    err_t err = {0};
    const char *path = json_string_value(json_object_get(args, "path"));
    json_t *content = json_object_get(args, "content");
    json_t *b64 = json_object_get(args, "base64");
    if (!content == !b64)
        return s_text_result(true, "error: write_file needs exactly one of "
                                   "\"content\" (text) or \"base64\" (bytes)");
    if (!json_is_string(content ? content : b64))
        return s_text_result(true,
                             "error: write_file: \"%s\" must be a "
                             "string",
                             content ? "content" : "base64");
    bool remote = b->cfg->session->gateway_url;
    const char *rel = s_relpath(path, remote, &err);
    if (!rel)
        return s_text_result(true, "error: write_file: %s", err.text);
    unsigned char *bytes;
    size_t len;
    if (content) {
        len = json_string_length(content);
        bytes = (unsigned char *)xstrndup(json_string_value(content), len);
    } else {
        bytes = ag_base64_decode(json_string_value(b64), &len);
        if (!bytes)
            return s_text_result(true,
                                 "error: write_file: \"base64\" is not valid "
                                 "base64; nothing was written");
    }
    json_t *r = NULL;
    if (len > AG_MCP_MAX_FILE) {
        r = s_text_result(true,
                          "error: write_file: %zu bytes refused: the limit "
                          "is %zu bytes (4 MiB)",
                          len, AG_MCP_MAX_FILE);
        goto out;
    }
    ag_session_t *s = s_session(b, &err);
    if (!s) {
        r = s_text_result(true, "error: write_file: %s", err.text);
        goto out;
    }
    /* Where it goes, as the kernel sees it, and as it is shown. Through a
     * gateway: the kernel's own working directory. */
    char *target = NULL, *shown;
    if (remote)
        shown = s_kernel_path(s, rel, &target, &err);
    else
        shown = target = xasprintf(SB_WORKSPACE_PATH "/%s", rel);
    if (!shown) {
        r = s_text_result(true, "error: write_file: %s", err.text);
        goto out;
    }
    size_t cap = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
    char *enc = xmalloc(cap);
    sodium_bin2base64(enc, cap, bytes, len, sodium_base64_VARIANT_ORIGINAL);
    json_t *jt = json_string(target);
    char *lit = json_dumps(jt, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    char *code =
        xasprintf("%s\n__ja_write(%s, '%s')\n", ag_mcp_write_file_py, lit, enc);
    free(lit);
    json_decref(jt);
    free(enc);
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    kb_output_t *out = kb_output_new(NULL, 1 << 16);
    int rc = kb_kernel_execute(ag_session_kernel(s), code, &xo, 60000, out,
                               NULL, &err);
    free(code);
    json_t *o = json_array_get(kb_output_outputs(out), 0);
    const char *ename = json_string_value(json_object_get(o, "ename"));
    if (rc != 0) {
        r = s_text_result(true, "error: write_file: %s", err.text);
    } else if (strcmp(kb_output_status(out) ? kb_output_status(out) : "error",
                      "ok") != 0) {
        r = s_text_result(true, "error: write_file: %s: %s",
                          ename ? ename : "the write failed",
                          json_string_value(json_object_get(o, "evalue"))
                              ? json_string_value(json_object_get(o, "evalue"))
                              : "");
    } else {
        char hex[65];
        s_sha256_hex(bytes, len, hex);
        r = s_text_result(false, "wrote %zu bytes to %s (sha256 %s)", len,
                          shown, hex);
    }
    kb_output_destroy(&out);
    if (shown != target)
        free(shown);
    free(target);
out:
    free(bytes);
    return r;
}

static void
s_update_metadata(ag_mcp_box_t *b)
{
    json_t *m = json_pack("{s:s, s:s}", "version", JUPYTER_AGENT_VERSION,
                          "source", "mcp");
    /* The --file inputs with their hashes, as ask and run record them, so
     * that 'archive pack' packs them; kept from the last session when none
     * is running. */
    json_t *old = json_object_get(
        nb_notebook_metadata(nb_record_notebook(b->record)), "jupyter_agent");
    if (b->session) {
        json_object_set_new(m, "sandbox", ag_session_policy_json(b->session));
        json_object_set_new(m, "inputs", ag_session_inputs_json(b->session));
    } else {
        json_t *v;
        if ((v = json_object_get(old, "sandbox")))
            json_object_set(m, "sandbox", v);
        if ((v = json_object_get(old, "inputs")))
            json_object_set(m, "inputs", v);
    }
    if (b->cfg->session->timeout_ms > 0)
        json_object_set_new(m, "timeout_s",
                            json_real(b->cfg->session->timeout_ms / 1000.0));
    nb_record_set_metadata(b->record, "jupyter_agent", m);
}

int
ag_mcp_box_save_notebook(ag_mcp_box_t *b, const char *path, err_t *err)
{
    s_update_metadata(b);
    return nb_record_save(b->record, path, err);
}

/* openat2 beneath `dirfd`, never through a symlink or onto another
 * mount: an fd, or -1 with errno. */
static int
s_open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
}

static bool
s_exported(const ag_mcp_box_t *b, const struct stat *st)
{
    for (size_t i = 0; i < b->nexported; i++)
        if (b->exported[i].dev == st->st_dev &&
            b->exported[i].ino == st->st_ino &&
            b->exported[i].ctime.tv_sec == st->st_ctim.tv_sec &&
            b->exported[i].ctime.tv_nsec == st->st_ctim.tv_nsec)
            return true;
    return false;
}

/* Write `len` bytes of `text` as `rel` (checked: plain components) under
 * directory `dir`: every component reached from dir's fd without
 * following a symlink; a new file, or one this session wrote before
 * (swapped in atomically, and only if it still is that file). 0, or -1 +
 * err saying what was refused. */
static int
s_export_write(ag_mcp_box_t *b, const char *dir, const char *rel,
               const char *label, const char *text, size_t len, err_t *err)
{
    int rc = -1, dfd = -1, pfd = -1, fd = -1;
    char *parent = xstrdup(rel), *tmp = NULL;
    char *slash = strrchr(parent, '/');
    const char *name = slash ? slash + 1 : parent;
    if (slash)
        *slash = '\0';
    dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        err_set(err, ERR_IO, "cannot open the --notebook directory %s: %s", dir,
                strerror(errno));
        goto out;
    }
    pfd =
        slash ? s_open_beneath(dfd, parent, O_PATH | O_DIRECTORY, 0) : dup(dfd);
    if (pfd < 0) {
        err_set(err, ERR_USAGE, "%s refused: %s%s", label,
                errno == ELOOP || errno == EXDEV || errno == ENOTDIR
                    ? "a directory on the way is a symbolic link (or not a "
                      "directory, or another mount); export_notebook writes "
                      "only in real directories under "
                    : "no such directory under ",
                dir);
        goto out;
    }
    struct stat old;
    bool exists = fstatat(pfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !(S_ISREG(old.st_mode) && s_exported(b, &old))) {
        err_set(err, ERR_USAGE,
                "%s refused: it exists and this session did not write it "
                "(export_notebook never replaces other files, nor follows "
                "symbolic links); choose a new name",
                label);
        goto out;
    }
    unsigned char rnd[6];
    char hex[13];
    randombytes_buf(rnd, sizeof rnd);
    sodium_bin2hex(hex, sizeof hex, rnd, sizeof rnd);
    tmp = xasprintf(".%.200s.%s.tmp", name, hex);
    fd = s_open_beneath(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY, 0644);
    if (fd < 0) {
        err_set(err, ERR_IO, "cannot create a file in %s: %s", dir,
                strerror(errno));
        goto out;
    }
    struct stat st;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    if (off < len || fsync(fd) < 0) {
        err_set(err, ERR_IO, "writing %s under %s: %s", label, dir,
                strerror(errno));
        goto unlink;
    }
    int r;
    if (!exists) {
        /* Never over an entry that appeared meanwhile. */
        r = renameat2(pfd, tmp, pfd, name, RENAME_NOREPLACE);
        if (r < 0 && (errno == EINVAL || errno == ENOSYS) &&
            (r = linkat(pfd, tmp, pfd, name, 0)) == 0)
            unlinkat(pfd, tmp, 0);
    } else {
        /* Swap, then check what came out is the file we wrote before. */
        r = renameat2(pfd, tmp, pfd, name, RENAME_EXCHANGE);
        struct stat out_st;
        if (r == 0 &&
            (fstatat(pfd, tmp, &out_st, AT_SYMLINK_NOFOLLOW) < 0 ||
             out_st.st_dev != old.st_dev || out_st.st_ino != old.st_ino)) {
            renameat2(pfd, tmp, pfd, name, RENAME_EXCHANGE);
            errno = EEXIST;
            r = -1;
        }
    }
    if (r < 0) {
        err_set(err, errno == EEXIST ? ERR_USAGE : ERR_IO, "%s refused: %s",
                label,
                errno == EEXIST ? "a file this session did not write took "
                                  "its place; choose a new name"
                                : strerror(errno));
        goto unlink;
    }
    if (exists)
        unlinkat(pfd, tmp, 0);
    if (fstat(fd, &st) < 0) { /* cannot fail on an open fd */
        err_set(err, ERR_IO, "%s: %s", label, strerror(errno));
        goto out;
    }
    b->exported =
        xrealloc(b->exported, (b->nexported + 1) * sizeof *b->exported);
    b->exported[b->nexported++] =
        (s_file_id_t){st.st_dev, st.st_ino, st.st_ctim};
    rc = 0;
    goto out;
unlink:
    unlinkat(pfd, tmp, 0);
out:
    if (fd >= 0)
        close(fd);
    if (pfd >= 0)
        close(pfd);
    if (dfd >= 0)
        close(dfd);
    free(tmp);
    free(parent);
    return rc;
}

static json_t *
s_export(ag_mcp_box_t *b, const json_t *args)
{
    json_t *jp = json_object_get(args, "path");
    if (jp && !json_is_string(jp))
        return s_text_result(true, "error: \"path\" must be a string");
    nb_notebook_t *nb = nb_record_notebook(b->record);
    if (!jp) {
        s_update_metadata(b);
        char *text = nb_notebook_write_mem(nb, NULL);
        if (!text)
            return s_text_result(true, "error: the notebook could not be "
                                       "serialised");
        json_t *r = json_pack(
            "{s:[{s:s, s:{s:s, s:s, s:s}}, {s:s, s:s}], s:b}", "content",
            "type", "resource", "resource", "uri",
            "jupyter-agent://session/notebook.ipynb", "mimeType",
            "application/x-ipynb+json", "text", text, "type", "text", "text",
            "the session as an nbformat 4.5 notebook (resource above)",
            "isError", 0);
        free(text);
        return r;
    }
    const char *path = json_string_value(jp);
    if (!b->cfg->notebook_path)
        return s_text_result(true,
                             "error: export_notebook: this server was started "
                             "without --notebook PATH, so it writes no host "
                             "files; call export_notebook without a path to "
                             "get the notebook as a resource");
    char *copy = xstrdup(b->cfg->notebook_path);
    char *dir = xstrdup(dirname(copy));
    free(copy);
    size_t dl = strlen(dir);
    const char *rel = path;
    if (path[0] == '/') {
        if (strncmp(path, dir, dl) != 0 || path[dl] != '/')
            rel = NULL;
        else
            rel = path + dl + 1;
    }
    err_t err = {0};
    json_t *r;
    size_t rl = rel ? strlen(rel) : 0;
    char *shown = esc_dup(path, ESC_NAME);
    if (!rel || sb_files_check_relpath(rel, &err) < 0 || rl < 7 ||
        strcmp(rel + rl - 6, ".ipynb") != 0) {
        r = s_text_result(true,
                          "error: export_notebook: %s refused: the path must "
                          "end in .ipynb and stay under %s (the directory of "
                          "--notebook)",
                          shown, dir);
    } else {
        s_update_metadata(b);
        size_t len = 0;
        char *text = nb_notebook_write_mem(nb, &len);
        if (!text)
            r = s_text_result(true, "error: the notebook could not be "
                                    "serialised");
        else if (s_export_write(b, dir, rel, shown, text, len, &err) == 0)
            r = s_text_result(false, "wrote the session (%zu cells) to %s%s%s",
                              nb_notebook_ncells(nb), path[0] == '/' ? "" : dir,
                              path[0] == '/' ? "" : "/", shown);
        else
            r = s_text_result(true, "error: export_notebook: %s", err.text);
        free(text);
    }
    free(shown);
    free(dir);
    return r;
}

static json_t *
s_reset(ag_mcp_box_t *b, const json_t *args)
{
    (void)args;
    if (!b->session)
        return s_text_result(false, "no kernel was running; the next call "
                                    "starts a fresh one");
    err_t err = {0};
    if (kb_kernel_restart(ag_session_kernel(b->session), &err) < 0) {
        s_stop_session(b, "reset failed");
        return s_text_result(true,
                             "error: reset: %s; the next call starts a "
                             "new session",
                             err.text);
    }
    json_t *cell = nb_record_add_markdown(
        b->record, "*jupyter-agent: the kernel was reset (variables and "
                   "imports gone, files kept)*");
    json_t *md = json_object_get(cell, "metadata");
    /* "action": "reset" is what 'archive rerun' replays (a restart). */
    if (json_is_object(md))
        json_object_set_new(
            md, "jupyter_agent",
            json_pack("{s:s, s:s}", "role", "note", "action", "reset"));
    return s_text_result(false,
                         "a fresh kernel was started: variables and imports "
                         "are gone; files in %s were kept",
                         b->cfg->session->gateway_url
                             ? "the kernel's working directory on the "
                               "Jupyter server"
                             : SB_WORKSPACE_PATH);
}

typedef struct s_tool {
    const char *name;
    const char *description; /* NULL: ag_tools' own */
    const char *input;       /* JSON Schema text; NULL: ag_tools' own */
    const char *output;      /* JSON Schema text of structuredContent */
    s_tool_fn fn;
    const char *remote_description; /* through a gateway; NULL: the same */
    const char *remote_input;       /* through a gateway; NULL: the same */
} s_tool_t;

/* read_file's and write_file's "path" through a gateway. */
#define REMOTE_PATH_SCHEMA                                                     \
    "\"path\": {\"type\": \"string\", \"description\": \"NAME or DIR/NAME, "   \
    "relative to the kernel's working directory\"}"

static const s_tool_t s_tools[] = {
    {"python",
     AG_TOOLS_PYTHON_DESCRIPTION
     " A cell over its timeout is interrupted; if it does not stop, the "
     "kernel is restarted and its state is lost (the result says so).",
     "{\"type\": \"object\", \"properties\": {" AG_TOOLS_PYTHON_CODE_SCHEMA
     ", \"timeout\": {\"type\": \"number\", \"exclusiveMinimum\": 0, "
     "\"maximum\": 3600, \"description\": \"seconds before the cell is "
     "interrupted (default and upper bound: the server's --timeout)\"}}, "
     "\"required\": "
     "[\"code\"], \"additionalProperties\": false}",
     "{\"type\": \"object\", \"properties\": {\"status\": {\"type\": "
     "\"string\", \"enum\": [\"ok\", \"error\", \"timeout\", "
     "\"interrupted\", \"died\", \"failed\"]}, \"execution_count\": "
     "{\"type\": [\"integer\", \"null\"]}, \"outputs\": {\"type\": "
     "\"array\", \"items\": {\"type\": \"object\"}, \"description\": "
     "\"nbformat 4 output dicts\"}}, \"required\": [\"status\", "
     "\"execution_count\", \"outputs\"]}",
     s_python, NULL, NULL},
    {"list_files", NULL, NULL, NULL, s_list_files, NULL, NULL},
    {"read_file",
     "Read a file from the workspace /mnt/data (at most 4 MiB): text comes "
     "back as text, other files as a base64 blob resource. Only regular "
     "files; symlinks are refused.",
     "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": "
     "\"string\", \"description\": \"/mnt/data/NAME or NAME\"}}, "
     "\"required\": [\"path\"], \"additionalProperties\": false}",
     NULL, s_read_file,
     "Read a file from the kernel's working directory on the Jupyter server "
     "(at most 4 MiB), through the kernel, every chunk checked by SHA-256: "
     "text comes back as text, other files as a base64 blob resource. Only "
     "regular files; symlinks are refused.",
     "{\"type\": \"object\", \"properties\": {" REMOTE_PATH_SCHEMA "}, "
     "\"required\": [\"path\"], \"additionalProperties\": false}"},
    {"write_file",
     "Write a file into the workspace /mnt/data (at most 4 MiB), from text "
     "(content) or bytes (base64). Parent directories are created.",
     "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": "
     "\"string\", \"description\": \"/mnt/data/NAME or NAME\"}, "
     "\"content\": {\"type\": \"string\", \"description\": \"text, "
     "written as UTF-8\"}, \"base64\": {\"type\": \"string\", "
     "\"description\": \"bytes, base64-encoded\"}}, \"required\": "
     "[\"path\"], \"additionalProperties\": false}",
     NULL, s_write_file,
     "Write a file into the kernel's working directory on the Jupyter server "
     "(at most 4 MiB), from text (content) or bytes (base64). Parent "
     "directories are created.",
     "{\"type\": \"object\", \"properties\": {" REMOTE_PATH_SCHEMA
     ", \"content\": {\"type\": \"string\", \"description\": \"text, "
     "written as UTF-8\"}, \"base64\": {\"type\": \"string\", "
     "\"description\": \"bytes, base64-encoded\"}}, \"required\": "
     "[\"path\"], \"additionalProperties\": false}"},
    {"export_notebook",
     "The whole session as an nbformat 4.5 notebook (every python cell with "
     "its outputs): returned as a resource, or written to a host path under "
     "the directory the operator allowed (--notebook).",
     "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": "
     "\"string\", \"description\": \"where to write it on the host "
     "(.ipynb, under the --notebook directory); omit to get the notebook "
     "back\"}}, \"additionalProperties\": false}",
     NULL, s_export, NULL, NULL},
    {"reset",
     "Restart the kernel: variables and imports are gone, files in the "
     "workspace stay.",
     "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": "
     "false}",
     NULL, s_reset, NULL, NULL},
    {"install_packages", NULL, NULL, NULL, s_install, NULL, NULL},
    {"shell", AG_MCP_SHELL_DESCRIPTION, AG_MCP_SHELL_INPUT,
     AG_MCP_SHELL_OUTPUT_SCHEMA, s_shell, NULL, NULL},
};

static const s_tool_t *
s_find(ag_mcp_box_t *b, const char *name)
{
    /* install_packages only where it can work: a signed manifest. */
    if (strcmp(name, "install_packages") == 0 && !b->cfg->session->packages_dir)
        return NULL;
    /* shell: commands in our own box (not a gateway's kernel). */
    if (strcmp(name, "shell") == 0 && b->cfg->session->gateway_url)
        return NULL;
    for (size_t i = 0; i < sizeof s_tools / sizeof s_tools[0]; i++)
        if (strcmp(s_tools[i].name, name) == 0)
            return &s_tools[i];
    return NULL;
}

bool
ag_mcp_box_has_tool(ag_mcp_box_t *b, const char *name)
{
    return s_find(b, name) != NULL;
}

/* ag_tools' declaration of `name` ({name, description, parameters}). */
static json_t *
s_builtin(ag_mcp_box_t *b, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(ag_tools_schemas(b->tools), i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return t;
    }
    return NULL;
}

json_t *
ag_mcp_box_tools(ag_mcp_box_t *b)
{
    json_t *list = json_array();
    for (size_t i = 0; i < sizeof s_tools / sizeof s_tools[0]; i++) {
        const s_tool_t *d = &s_tools[i];
        if (!s_find(b, d->name))
            continue;
        json_t *own = s_builtin(b, d->name);
        json_t *t = json_pack("{s:s}", "name", d->name);
        bool remote = b->cfg->session->gateway_url;
        const char *description = remote && d->remote_description
                                      ? d->remote_description
                                      : d->description;
        const char *input =
            remote && d->remote_input ? d->remote_input : d->input;
        if (description) {
            char *desc = ag_tools_describe(b->tools, description);
            json_object_set_new(t, "description", json_string(desc));
            free(desc);
        } else {
            json_object_set_new(
                t, "description",
                json_incref(json_object_get(own, "description")));
        }
        json_object_set_new(
            t, "inputSchema",
            input ? json_loads(input, 0, NULL)
                  : json_incref(json_object_get(own, "parameters")));
        if (d->output)
            json_object_set_new(t, "outputSchema",
                                json_loads(d->output, 0, NULL));
        json_array_append_new(list, t);
    }
    return list;
}

json_t *
ag_mcp_box_call(ag_mcp_box_t *b, const char *name, const json_t *args,
                const ag_mcp_call_t *call, bool *cancelled)
{
    const s_tool_t *d = s_find(b, name);
    b->call = call;
    b->stopped = b->outlived = false;
    b->progress_sent = 0;
    json_t *r =
        d ? d->fn(b, args)
          : s_text_result(true, "error: there is no tool named %s", name);
    b->call = NULL;
    if (b->outlived) { /* an answer, not a cancellation */
        json_decref(r);
        s_stop_session(b, "older than --max-lifetime");
        r = s_text_result(true,
                          "error: the session reached --max-lifetime (%g s) "
                          "while this call ran: the cell was interrupted and "
                          "the kernel stopped (variables gone); the next call "
                          "starts a fresh one",
                          b->cfg->session->max_lifetime_ms / 1000.0);
        b->stopped = false;
    }
    b->used_ms = clock_mono_ms();
    if (cancelled)
        *cancelled = b->stopped;
    return r;
}

ag_mcp_box_t *
ag_mcp_box_new(const ag_mcp_config_t *cfg)
{
    ag_mcp_box_t *b = xcalloc(1, sizeof *b);
    b->cfg = cfg;
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
    b->displays = kb_displays_new();
    b->record = nb_record_new();
    b->env =
        (ag_tool_env_t){.run_python = s_run_python,
                        .restart = s_restart,
                        .session = s_env_session,
                        .arg = b,
                        .displays = b->displays,
                        .max_output_bytes = cfg->session->max_output_bytes};
    b->status = "failed";
    return b;
}

static void
s_box_free(ag_mcp_box_t **p, bool hand_off)
{
    if (!p || !*p)
        return;
    ag_mcp_box_t *b = *p;
    /* The session ends with its client, who may not wait long (the SDK
     * kills a stdio server 4 s after closing its input): no graceful
     * kernel shutdown, the whole box goes. */
    if (hand_off)
        ag_session_hand_off(&b->session);
    else if (b->session)
        kb_kernel_kill(ag_session_kernel(b->session));
    ag_session_destroy(&b->session);
    ag_tools_destroy(&b->tools);
    nb_record_destroy(&b->record);
    kb_displays_destroy(&b->displays);
    free(b->expired_note);
    free(b->exported);
    free(b);
    *p = NULL;
}

void
ag_mcp_box_destroy(ag_mcp_box_t **p)
{
    s_box_free(p, false);
}

void
ag_mcp_box_hand_off(ag_mcp_box_t **p)
{
    s_box_free(p, true);
}

/* ---- instructions ----------------------------------------------------- */

char *
ag_mcp_instructions(const ag_mcp_config_t *cfg)
{
    const ag_session_opts_t *o = cfg->session;
    const sb_policy_t *p = &o->policy;
    char mem[32], disk[32];
    sb_policy_format_bytes(p->memory_bytes, mem, sizeof mem);
    sb_policy_format_bytes(p->workspace_bytes, disk, sizeof disk);
    /* What the box can import: the host's /usr is mounted read-only. */
    static const char *const libs[][2] = {
        {"numpy", "numpy"},           {"pandas", "pandas"},
        {"matplotlib", "matplotlib"}, {"scipy", "scipy"},
        {"sklearn", "scikit-learn"},  {"statsmodels", "statsmodels"},
        {"sympy", "sympy"},           {"PIL", "pillow"},
        {"openpyxl", "openpyxl"},     {"pyarrow", "pyarrow"},
        {"seaborn", "seaborn"},       {"networkx", "networkx"}};
    buf_t l;
    buf_init(&l, 0);
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        char *dir = xasprintf("/usr/lib/python3/dist-packages/%s", libs[i][0]);
        if (access(dir, F_OK) == 0)
            buf_printf(&l, "%s%s", l.len ? ", " : "", libs[i][1]);
        free(dir);
    }
    const char *libs_text = l.len ? buf_cstr(&l) : "the standard library";
    char *text;
    if (o->gateway_url)
        text = xasprintf(
            "A Python code interpreter whose IPython kernel runs on a Jupyter "
            "server (%s), one kernel per MCP session, in a private working "
            "directory of its own there. State persists between python "
            "calls, as in a notebook. The server's operator sets its "
            "isolation, libraries and limits. %g s per python call by "
            "default (then the cell is interrupted). Plots come back as "
            "images (call plt.show()). list_files lists the session's "
            "directory; write_file/read_file move files in and out of it "
            "(at most 4 MiB each); export_notebook returns the session as a "
            "Jupyter notebook; reset restarts the kernel.",
            o->gateway_url, o->timeout_ms / 1000.0);
    else if (o->no_sandbox)
        text = xasprintf(
            "A local Python code interpreter WITHOUT a sandbox "
            "(--no-sandbox): each MCP session has its own IPython kernel, "
            "running as a plain process with the operator's full access to "
            "files and network. State persists between python calls, as in "
            "a notebook. Libraries: %s. %g s per python call by default "
            "(then the cell is interrupted). Plots come back as images (call "
            "plt.show()). export_notebook returns the session as a Jupyter "
            "notebook; reset restarts the kernel.",
            libs_text, o->timeout_ms / 1000.0);
    else
        text = xasprintf(
            "A local Python code interpreter: each MCP session has its own "
            "IPython kernel in a Linux-namespace sandbox. State persists "
            "between python calls, as in a notebook. The sandbox has NO "
            "network (pip install from PyPI cannot work%s). Files live in "
            "/mnt/data (%s; use write_file/read_file to move files in and "
            "out, at most 4 MiB each; list_files lists them). Libraries: %s. "
            "Limits: %s of memory, %g CPU, %u processes, %g s per python "
            "call by default (then the cell is interrupted). Plots come back "
            "as images (call plt.show()). export_notebook returns the "
            "session as a Jupyter notebook; reset restarts the kernel.",
            o->packages_dir ? "; install_packages installs from the "
                              "operator's signed wheels"
                            : "",
            disk, libs_text, mem, p->cpus, p->pids, o->timeout_ms / 1000.0);
    buf_release(&l);
    return text;
}
