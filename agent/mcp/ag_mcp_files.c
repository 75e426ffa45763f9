/* read_file and write_file: files in and out of an MCP box's workspace,
 * or a gateway kernel's working directory (see ag_mcp_tools_impl.h). */
#include "agent/mcp/ag_mcp_tools_impl.h"

#include "agent/loop/ag_render.h"
#include "agent/mcp/ag_mcp_pysrc.h"
#include "common/escape.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"
#include "sandbox/sb_files.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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
        return err_errno(err, ERR_IO, "cannot open the workspace");
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
    ag_session_t *s = ag_mcp_box_session(b, err);
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

json_t *
ag_mcp_tool_read_file(ag_mcp_box_t *b, const json_t *args)
{
    err_t err = {0};
    const char *path = json_string_value(json_object_get(args, "path"));
    const char *rel = s_relpath(path, b->cfg->session->gateway_url, &err);
    char *data = NULL, *shown = NULL;
    size_t len = 0;
    if (!rel || s_read_bytes(b, rel, &data, &len, &shown, &err) < 0)
        return ag_mcp_text_result(true, "error: read_file: %s", err.text);
    char hex[65];
    s_sha256_hex(data, len, hex);
    ag_session_t *as = ag_mcp_box_session(b, NULL);
    if (as && ag_session_audit_file(as, "out", "mcp read_file", shown, NULL,
                                    len, hex, &err))
        log_warn("--audit: %s", err.text);
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

json_t *
ag_mcp_tool_write_file(ag_mcp_box_t *b, const json_t *args)
{
    err_t err = {0};
    const char *path = json_string_value(json_object_get(args, "path"));
    json_t *content = json_object_get(args, "content");
    json_t *b64 = json_object_get(args, "base64");
    if (!content == !b64)
        return ag_mcp_text_result(true,
                                  "error: write_file needs exactly one of "
                                  "\"content\" (text) or \"base64\" (bytes)");
    if (!json_is_string(content ? content : b64))
        return ag_mcp_text_result(true,
                                  "error: write_file: \"%s\" must be a "
                                  "string",
                                  content ? "content" : "base64");
    bool remote = b->cfg->session->gateway_url;
    const char *rel = s_relpath(path, remote, &err);
    if (!rel)
        return ag_mcp_text_result(true, "error: write_file: %s", err.text);
    unsigned char *bytes;
    size_t len;
    if (content) {
        len = json_string_length(content);
        bytes = (unsigned char *)xstrndup(json_string_value(content), len);
    } else {
        bytes = ag_base64_decode(json_string_value(b64), &len);
        if (!bytes)
            return ag_mcp_text_result(
                true, "error: write_file: \"base64\" is not valid "
                      "base64; nothing was written");
    }
    json_t *r = NULL;
    if (len > AG_MCP_MAX_FILE) {
        r = ag_mcp_text_result(
            true,
            "error: write_file: %zu bytes refused: the limit "
            "is %zu bytes (4 MiB)",
            len, AG_MCP_MAX_FILE);
        goto out;
    }
    ag_session_t *s = ag_mcp_box_session(b, &err);
    if (!s) {
        r = ag_mcp_text_result(true, "error: write_file: %s", err.text);
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
        r = ag_mcp_text_result(true, "error: write_file: %s", err.text);
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
        r = ag_mcp_text_result(true, "error: write_file: %s", err.text);
    } else if (strcmp(kb_output_status(out) ? kb_output_status(out) : "error",
                      "ok") != 0) {
        r = ag_mcp_text_result(
            true, "error: write_file: %s: %s",
            ename ? ename : "the write failed",
            json_string_value(json_object_get(o, "evalue"))
                ? json_string_value(json_object_get(o, "evalue"))
                : "");
    } else {
        char hex[65];
        s_sha256_hex(bytes, len, hex);
        err_t aerr = {0};
        if (ag_session_audit_file(s, "in", "mcp write_file", shown, NULL, len,
                                  hex, &aerr))
            log_warn("--audit: %s", aerr.text);
        r = ag_mcp_text_result(false, "wrote %zu bytes to %s (sha256 %s)", len,
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
