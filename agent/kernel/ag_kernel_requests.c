/* The agent kernel's requests besides execute_request: complete,
 * inspect and is_complete (forwarded to the inner Python kernel where they
 * concern %%python cells), kernel_info, and comms (forwarded both ways). */
#include "agent/kernel/ag_kernel_impl.h"
#include "common/jget.h"
#include "common/jpaths.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Unicode code points in the first `bytes` bytes of UTF-8 text. */
static long
s_codepoints(const char *s, size_t bytes)
{
    long n = 0;
    for (size_t i = 0; i < bytes; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            n++;
    return n;
}

/* Byte offset of code point `cp` in UTF-8 `s` (clamped to its end). */
static size_t
s_byte_offset(const char *s, long cp)
{
    size_t i = 0;
    for (long n = 0; s[i]; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80 && n++ == cp)
            return i;
    }
    return i;
}

/* ---- complete / inspect / is_complete ---- */

/* Forward a request to the inner kernel and return its reply content (new
 * reference), or NULL. */
static json_t *
s_ask_inner(ag_kernel_t *k, const char *msg_type, json_t *content)
{
    err_t err = {0};
    ag_session_t *session = ag_kernel_session(k, &err);
    if (!session) {
        log_warn("%s: %s", msg_type, err.text);
        json_decref(content);
        return NULL;
    }
    kb_client_t *c = kb_kernel_client(ag_session_kernel(session));
    kb_msg_t *reply = kb_client_request(c, KB_SHELL, msg_type, content,
                                        INNER_REQUEST_MS, &err);
    if (!reply) {
        log_warn("%s: %s", msg_type, err.text);
        return NULL;
    }
    json_t *out = json_incref(kb_msg_content(reply));
    kb_msg_destroy(&reply);
    return out;
}

/* Completions of the magic we know, for text at the start of a cell. */
static json_t *
s_complete_magic(const char *code, long cursor)
{
    static const char *const magics[] = {
        AG_KERNEL_MAGIC_PYTHON, AG_KERNEL_MAGIC_RESET,
        AG_KERNEL_MAGIC_EXPORT, AG_KERNEL_MAGIC_MODEL,
        AG_KERNEL_MAGIC_UPLOAD, AG_KERNEL_MAGIC_DOWNLOAD};
    size_t end = s_byte_offset(code, cursor);
    json_t *matches = json_array();
    /* Only a first line that is a magic prefix up to the cursor. */
    if (end > 0 && code[0] == '%' && !memchr(code, '\n', end))
        for (size_t i = 0; i < sizeof magics / sizeof magics[0]; i++)
            if (strncmp(magics[i], code, end) == 0)
                json_array_append_new(matches, json_string(magics[i]));
    json_int_t start = json_array_size(matches) ? 0 : (json_int_t)cursor;
    return json_pack("{s:s, s:o, s:I, s:I, s:{}}", "status", "ok", "matches",
                     matches, "cursor_start", start, "cursor_end",
                     (json_int_t)cursor, "metadata");
}

static long
s_cursor(json_t *content, const char *code)
{
    json_t *c = json_object_get(content, "cursor_pos");
    long total = s_codepoints(code, strlen(code));
    if (!json_is_integer(c))
        return total;
    long v = (long)json_integer_value(c);
    return v < 0 ? 0 : v > total ? total : v;
}

static int
s_on_complete(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    ag_kernel_t *k = arg;
    json_t *content = kb_msg_content(req);
    const char *code = jget_str(content, "code", "");
    long cursor = s_cursor(content, code);
    const char *body = NULL;
    long offset = ag_kernel_python_cell(code, &body)
                      ? s_codepoints(code, (size_t)(body - code))
                      : -1;
    json_t *reply = NULL;
    if (offset >= 0 && cursor >= offset && body > code && body[-1] == '\n') {
        reply = s_ask_inner(k, "complete_request",
                            json_pack("{s:s, s:I}", "code", body, "cursor_pos",
                                      (json_int_t)(cursor - offset)));
        if (reply && strcmp(jget_str(reply, "status", ""), "ok") == 0) {
            for (int i = 0; i < 2; i++) {
                const char *key = i ? "cursor_end" : "cursor_start";
                json_t *v = json_object_get(reply, key);
                json_object_set_new(
                    reply, key,
                    json_integer((json_is_integer(v) ? json_integer_value(v)
                                                     : cursor - offset) +
                                 offset));
            }
        } else {
            json_decref(reply);
            reply = NULL;
        }
    }
    if (!reply)
        reply = s_complete_magic(code, cursor);
    return kb_server_reply(s, ch, req, "complete_reply", reply, NULL);
}

static const char s_magic_help[] =
    "jupyter-agent cells\n"
    "\n"
    "  <a request in plain language>  the agent answers it, running Python\n"
    "                                 in the session when it needs to\n"
    "  %%python                       the rest of the cell runs as Python in\n"
    "  <code>                         the session, exactly as written\n"
    "  %reset                         start a fresh Python session and\n"
    "                                 conversation; files in /mnt/data stay\n"
    "  %upload FILE...                copy files from the notebook's\n"
    "                                 directory into /mnt/data\n"
    "  %download PATH...              copy files or directories of\n"
    "                                 /mnt/data next to the notebook\n"
    "  %export PATH.ipynb             write the whole session so far as a\n"
    "                                 notebook\n"
    "  %model [PROVIDER:MODEL]        show or switch the model; the\n"
    "                                 conversation continues\n";

static int
s_on_inspect(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    ag_kernel_t *k = arg;
    json_t *content = kb_msg_content(req);
    const char *code = jget_str(content, "code", "");
    long cursor = s_cursor(content, code);
    const char *body = NULL;
    json_t *reply = NULL;
    if (ag_kernel_python_cell(code, &body)) {
        long offset = s_codepoints(code, (size_t)(body - code));
        if (cursor >= offset && body[-1] == '\n') {
            json_t *level = json_object_get(content, "detail_level");
            reply = s_ask_inner(
                k, "inspect_request",
                json_pack("{s:s, s:I, s:I}", "code", body, "cursor_pos",
                          (json_int_t)(cursor - offset), "detail_level",
                          json_is_integer(level) ? json_integer_value(level)
                                                 : 0));
        }
    }
    if (!reply) {
        bool magic = code[0] == '%';
        reply = magic ? json_pack("{s:s, s:b, s:{s:s}, s:{}}", "status", "ok",
                                  "found", 1, "data", "text/plain",
                                  s_magic_help, "metadata")
                      : json_pack("{s:s, s:b, s:{}, s:{}}", "status", "ok",
                                  "found", 0, "data", "metadata");
    }
    return kb_server_reply(s, ch, req, "inspect_reply", reply, NULL);
}

static int
s_on_is_complete(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                 void *arg)
{
    (void)arg; /* answered here: no session is started for it */
    const char *code = jget_str(kb_msg_content(req), "code", "");
    const char *body = NULL;
    json_t *reply = NULL;
    if (ag_kernel_python_cell(code, &body)) {
        /* As IPython's check_complete for every cell magic: the cell ends
         * with a blank line, never earlier (a frontend would otherwise
         * send "%%python\nimport time" after its first body line); until
         * then the next line is indented as the last. Lines as Python's
         * splitlines: a final newline starts no new line. */
        size_t len = strlen(code);
        if (len && code[len - 1] == '\n')
            len--;
        const char *last = code;
        for (size_t i = 0; i < len; i++)
            if (code[i] == '\n')
                last = code + i + 1;
        bool blank = true;
        for (const char *p = last; p < code + len; p++)
            blank = blank && (*p == ' ' || *p == '\t' || *p == '\r');
        if (blank) {
            reply = json_pack("{s:s}", "status", "complete");
        } else {
            char spaces[81];
            size_t indent = 0;
            for (const char *p = last; *p == ' ' || *p == '\t'; p++)
                indent += *p == '\t' ? 4 : 1;
            if (indent > 80)
                indent = 80;
            memset(spaces, ' ', indent);
            spaces[indent] = '\0';
            reply = json_pack("{s:s, s:s}", "status", "incomplete", "indent",
                              spaces);
        }
    } else {
        reply = json_pack("{s:s}", "status", "complete");
    }
    return kb_server_reply(s, ch, req, "is_complete_reply", reply, NULL);
}

/* ---- kernel_info, history, comm_info ---- */

static int
s_on_kernel_info(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                 void *arg)
{
    ag_kernel_t *k = arg;
    return kb_server_reply(s, ch, req, "kernel_info_reply",
                           json_deep_copy(k->info), NULL);
}

/* The comms live in the Python side: its comm_info, when it runs (a
 * frontend asks on connect; that alone starts no sandbox). */
static int
s_on_comm_info(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    ag_kernel_t *k = arg;
    json_t *reply = k->session
                        ? s_ask_inner(k, "comm_info_request",
                                      json_deep_copy(kb_msg_content(req)))
                        : NULL;
    if (!json_is_object(json_object_get(reply, "comms"))) {
        json_decref(reply);
        reply = json_pack("{s:s, s:{}}", "status", "ok", "comms");
    }
    return kb_server_reply(s, ch, req, "comm_info_reply", reply, NULL);
}

/* What the Python side publishes while handling a frontend's comm
 * message: forwarded under that message. */
typedef struct comm_fwd {
    ag_kernel_t *k;
    const kb_msg_t *req; /* the frontend's comm message (borrowed) */
} comm_fwd_t;

static void
s_forward_comm(const kb_msg_t *msg, void *arg)
{
    comm_fwd_t *f = arg;
    const char *type = kb_msg_type(msg);
    if (!strcmp(type, "status") || !strcmp(type, "execute_input"))
        return;
    kb_server_publish(f->k->server, f->req, type,
                      json_deep_copy(kb_msg_content(msg)), NULL);
}

/* comm_open, comm_msg, comm_close from the frontend: to the Python side
 * (ipywidgets in %%python cells), and what it answers back. Comm messages
 * have no reply. Without a Python session, a comm_open is closed again,
 * as ipykernel closes one for a target it does not know. */
static int
s_on_comm(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req, void *arg)
{
    (void)ch;
    ag_kernel_t *k = arg;
    json_t *content = kb_msg_content(req);
    const char *type = kb_msg_type(req);
    if (!k->session) {
        const char *id = jget_str(content, "comm_id", "");
        if (!strcmp(type, "comm_open"))
            kb_server_publish(s, req, "comm_close",
                              json_pack("{s:s, s:{}}", "comm_id", id, "data"),
                              NULL);
        return 0;
    }
    kb_client_t *c = kb_kernel_client(ag_session_kernel(k->session));
    comm_fwd_t f = {k, req};
    err_t err = {0};
    if (kb_client_send_pump(c, type, json_deep_copy(content), s_forward_comm,
                            &f, INNER_REQUEST_MS, &err))
        log_warn("%s: %s", type, err.text);
    return 0;
}

void
ag_kernel_requests_register(ag_kernel_t *k)
{
    kb_server_t *server = k->server;
    kb_server_on(server, "kernel_info_request", s_on_kernel_info, k);
    kb_server_on_control(server, "kernel_info_request", s_on_kernel_info, k);
    kb_server_on(server, "complete_request", s_on_complete, k);
    kb_server_on(server, "inspect_request", s_on_inspect, k);
    kb_server_on(server, "is_complete_request", s_on_is_complete, k);
    kb_server_on(server, "history_request", ag_kernel_on_history, k);
    kb_server_on(server, "comm_info_request", s_on_comm_info, k);
    kb_server_on(server, "comm_open", s_on_comm, k);
    kb_server_on(server, "comm_msg", s_on_comm, k);
    kb_server_on(server, "comm_close", s_on_comm, k);
}
