/*
 * e2b_http: one HTTP request as the E2B server's handlers see it, and the
 * ways to answer it: a whole body at once, or a stream that another thread
 * fills (an /execute, a Connect-RPC server stream) while the connection's
 * thread sends it.
 *
 * A handler answers exactly once (e2b_reply*, or e2b_stream_open); the
 * server answers 500 for a handler that did not. Everything here runs on
 * the connection's thread except the e2b_stream_* producer calls, which
 * are thread-safe.
 */
#ifndef AGENT_E2B_E2B_HTTP_H
#define AGENT_E2B_E2B_HTTP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* Which door a request came through. */
typedef enum e2b_port {
    E2B_PORT_API = 0,        /* the control plane (E2B_API_URL) */
    E2B_PORT_ENVD = 49983,   /* envd: files, filesystem and process RPC */
    E2B_PORT_INTERP = 49999, /* the code interpreter: /execute, /contexts */
} e2b_port_t;

typedef struct e2b_req {
    struct MHD_Connection *conn; /* borrowed */
    const char *method;          /* "GET", "POST" ... (borrowed) */
    const char *path;            /* the URL path, no query (borrowed) */
    e2b_port_t port;             /* which door */
    const char *body;            /* the body (NUL-terminated), "" if none */
    size_t body_len;
    enum MHD_Result ret; /* what the handler's answer returned */
    bool answered;       /* a response was queued */
    const char *extra_name, *extra_value; /* e2b_reply_header (static) */
} e2b_req_t;

/* A request header, or NULL (borrowed). */
const char *e2b_req_header(const e2b_req_t *r, const char *name);
/* A query argument (?name=value, decoded), or NULL (borrowed). */
const char *e2b_req_arg(const e2b_req_t *r, const char *name);

/* Answer with `len` bytes of `body` (copied) and Content-Type `ctype`
 * (NULL: none). */
void e2b_reply(e2b_req_t *r, unsigned status, const char *ctype,
               const void *body, size_t len);
/* Answer with JSON `j` (stolen; NULL: an empty object). */
void e2b_reply_json(e2b_req_t *r, unsigned status, json_t *j);
/* Answer {"code": status, "message": TEXT} as E2B's API does for errors
 * (the SDKs show the message). Logged at info. */
void e2b_reply_error(e2b_req_t *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One more header on the answer still to come (both static strings). */
void e2b_reply_header(e2b_req_t *r, const char *name, const char *value);
/* A bare status without body (204, 200). */
void e2b_reply_empty(e2b_req_t *r, unsigned status);

/* ---- streams ----------------------------------------------------------- */

typedef struct e2b_stream e2b_stream_t;

/* Answer `status` with a body of unknown length that the caller produces
 * with e2b_stream_write from any thread. `keepalive` (copied; NULL: none)
 * is written whenever nothing else was for `keepalive_s` seconds. Returns
 * the producer's reference (give it back with e2b_stream_close), or NULL
 * (then 500 was answered). */
e2b_stream_t *e2b_stream_open(e2b_req_t *r, unsigned status, const char *ctype,
                              const char *keepalive, int keepalive_s);
/* Queue bytes for the client. Bounded: while more than E2B_STREAM_MAX_PENDING
 * bytes wait unsent, it waits for the client (up to 30 s, then the stream
 * is dropped as gone). */
void e2b_stream_write(e2b_stream_t *st, const void *data, size_t len);
/* The client hung up (or stopped reading): stop producing. */
bool e2b_stream_gone(e2b_stream_t *st);
/* The producer is done: the body ends once sent. *p = NULL. */
void e2b_stream_close(e2b_stream_t **p);

#define E2B_STREAM_MAX_PENDING ((size_t)4 << 20)

#endif
