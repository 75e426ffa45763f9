#include "agent/e2b/e2b_connect.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool
e2b_connect_is_stream(const e2b_req_t *r)
{
    const char *ct = e2b_req_header(r, "Content-Type");
    return ct && strncasecmp(ct, "application/connect+", 20) == 0;
}

unsigned
e2b_connect_status(const char *code)
{
    static const struct {
        const char *code;
        unsigned status;
    } map[] = {
        {"canceled", 499},
        {"unknown", 500},
        {"invalid_argument", 400},
        {"deadline_exceeded", 504},
        {"not_found", 404},
        {"already_exists", 409},
        {"permission_denied", 403},
        {"resource_exhausted", 429},
        {"failed_precondition", 400},
        {"aborted", 409},
        {"out_of_range", 400},
        {"unimplemented", 501},
        {"internal", 500},
        {"unavailable", 503},
        {"data_loss", 500},
        {"unauthenticated", 401},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(code, map[i].code) == 0)
            return map[i].status;
    return 500;
}

char *
e2b_connect_envelope(unsigned char flags, const char *json, size_t len,
                     size_t *out_len)
{
    char *b = xmalloc(len + 5);
    b[0] = (char)flags;
    b[1] = (char)((len >> 24) & 0xff);
    b[2] = (char)((len >> 16) & 0xff);
    b[3] = (char)((len >> 8) & 0xff);
    b[4] = (char)(len & 0xff);
    memcpy(b + 5, json, len);
    *out_len = len + 5;
    return b;
}

json_t *
e2b_connect_request(e2b_req_t *r)
{
    const char *p = r->body;
    size_t n = r->body_len;
    if (e2b_connect_is_stream(r)) {
        if (n < 5) {
            e2b_connect_error(r, "invalid_argument",
                              "the request is not a Connect envelope (%zu "
                              "bytes)",
                              n);
            return NULL;
        }
        const unsigned char *u = (const unsigned char *)p;
        size_t len = ((size_t)u[1] << 24) | ((size_t)u[2] << 16) |
                     ((size_t)u[3] << 8) | u[4];
        if (u[0] & 0x01) {
            e2b_connect_error(r, "unimplemented",
                              "compressed messages are not supported; send "
                              "them uncompressed");
            return NULL;
        }
        if (len != n - 5) {
            e2b_connect_error(r, "invalid_argument",
                              "the envelope says %zu bytes but %zu came", len,
                              n - 5);
            return NULL;
        }
        p += 5;
        n = len;
    }
    if (n > E2B_CONNECT_MAX_MESSAGE) {
        e2b_connect_error(r, "resource_exhausted",
                          "a message of %zu bytes is over the limit (%zu)", n,
                          E2B_CONNECT_MAX_MESSAGE);
        return NULL;
    }
    json_error_t je;
    json_t *msg =
        n ? json_loadb(p, n, JSON_REJECT_DUPLICATES, &je) : json_object();
    if (!msg || !json_is_object(msg)) {
        e2b_connect_error(r, "invalid_argument",
                          "the request message is not a JSON object: %s",
                          msg ? "another JSON value" : je.text);
        json_decref(msg);
        return NULL;
    }
    return msg;
}

void
e2b_connect_reply(e2b_req_t *r, json_t *msg)
{
    e2b_reply_json(r, 200, msg);
}

static char *
s_end_message(const char *code, const char *message)
{
    json_t *j = code ? json_pack("{s:{s:s, s:s}}", "error", "code", code,
                                 "message", message ? message : "")
                     : json_object();
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return text;
}

void
e2b_connect_error(e2b_req_t *r, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    log_info("e2b: %s: %s: %s", r->path, code, text);
    if (e2b_connect_is_stream(r)) {
        char *end = s_end_message(code, text);
        size_t len;
        char *env = e2b_connect_envelope(0x02, end, strlen(end), &len);
        e2b_reply(r, 200, "application/connect+json", env, len);
        free(env);
        free(end);
    } else {
        e2b_reply_json(r, e2b_connect_status(code),
                       json_pack("{s:s, s:s}", "code", code, "message", text));
    }
    free(text);
}

e2b_stream_t *
e2b_connect_stream_open(e2b_req_t *r)
{
    return e2b_stream_open(r, 200, "application/connect+json", NULL, 0);
}

void
e2b_connect_stream_send(e2b_stream_t *st, const json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    size_t len;
    char *env = e2b_connect_envelope(0x00, text, strlen(text), &len);
    e2b_stream_write(st, env, len);
    free(env);
    free(text);
}

void
e2b_connect_stream_end(e2b_stream_t **st, const char *code, const char *message)
{
    if (!st || !*st)
        return;
    char *end = s_end_message(code, message);
    size_t len;
    char *env = e2b_connect_envelope(0x02, end, strlen(end), &len);
    e2b_stream_write(*st, env, len);
    free(env);
    free(end);
    e2b_stream_close(st);
}
