/*
 * ag_httpd: a hardened HTTP/1.1 server on libmicrohttpd, for the doors
 * that face clients (`mcp --http`, the E2B server).
 *
 * I/O runs on one event loop (MHD's internal epoll thread) that never
 * waits; requests are handled on a bounded pool of worker threads while
 * their connection is suspended, so a connection costs a socket and a
 * little memory, never a thread. Bounds, each in ag_httpd_limits_t:
 *
 *   - headers within header_ms of the connection (or of the end of the
 *     previous answer on a kept-alive connection), the whole request
 *     within request_ms, however slowly the bytes trickle: cut after;
 *   - per peer address, the connections that are incomplete (no request
 *     in yet, nothing answered on them) AND older than stale_ms: at most
 *     peer_stale; beyond, the oldest are cut. Fast clients, however many
 *     at once, never count: their request is in within milliseconds;
 *   - at most max_connections at once (fewer when RLIMIT_NOFILE is low);
 *     near the cap a new connection cuts the oldest incomplete one;
 *   - a body of at most max_body bytes (413), and at most body_in_flight
 *     bytes of bodies held over all requests (503);
 *   - at most workers handlers at once, queue_max more waiting (503).
 *
 * Ownership of a request (ag_httpd_req_t): exactly one owner at a time,
 * and only the owner touches it.
 *   1. The event loop, from the headers until it suspends the connection
 *      and queues the request (check runs here).
 *   2. One worker, from taking it off the queue until it hands it back
 *      with ag_httpd_reply or ag_httpd_stream: that call is the worker's
 *      last touch of `req` (it resumes the connection, and the event loop
 *      may free `req` at once).
 *   3. The event loop again, which queues the answer and frees `req` when
 *      MHD completes the request.
 * A stream (ag_httpd_stream_t) is shared by its writer and the event loop
 * under its own lock and freed by whichever lets go last.
 */
#ifndef AGENT_HTTP_AG_HTTPD_H
#define AGENT_HTTP_AG_HTTPD_H

#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct ag_httpd ag_httpd_t;
typedef struct ag_httpd_req ag_httpd_req_t;
typedef struct ag_httpd_stream ag_httpd_stream_t;

typedef struct ag_httpd_limits {
    int header_ms;            /* headers in by then (10 000) */
    int request_ms;           /* headers and body in by then (120 000) */
    int idle_s;               /* a write may stall this long (60) */
    int stale_ms;             /* an incomplete connection is "old" (2 000) */
    unsigned peer_stale;      /* old incomplete ones per peer (32) */
    unsigned max_connections; /* open at once (1 024) */
    size_t max_body;          /* one request's body (8 MiB) */
    size_t body_in_flight;    /* bodies held at once (16 MiB) */
    unsigned workers;         /* handlers at once (64) */
    unsigned queue_max;       /* requests waiting for a worker (128) */
    int keepalive_ms;         /* stream keep-alive interval (15 000) */
    size_t stream_buffer;     /* unsent stream bytes before a write
                                 waits (1 MiB) */
} ag_httpd_limits_t;

/* Every field of ag_httpd_limits_t at its default (above). */
void ag_httpd_limits_default(ag_httpd_limits_t *l);

/* Called on the event loop with the headers in (no body yet); must not
 * wait. Answer now with ag_httpd_reply (the body is not read), or return
 * without answering to read the body and pass the request to handle. */
typedef void (*ag_httpd_check_fn)(void *arg, ag_httpd_req_t *req);
/* Called on a worker with the whole request. Must answer (ag_httpd_reply
 * or ag_httpd_stream) exactly once; a handler that returns without an
 * answer is answered 500. */
typedef void (*ag_httpd_handle_fn)(void *arg, ag_httpd_req_t *req);
/* The daemon refuses `req` itself (413, 503, 500) on the event loop or a
 * worker, `text` saying why: answer it with ag_httpd_reply in the door's
 * own format. NULL: a text/plain body. */
typedef void (*ag_httpd_refuse_fn)(void *arg, ag_httpd_req_t *req,
                                   unsigned status, const char *text);

typedef struct ag_httpd_opts {
    const struct sockaddr *addr; /* where to listen (port 0: any free) */
    socklen_t addrlen;
    ag_httpd_check_fn check; /* may be NULL */
    ag_httpd_handle_fn handle;
    ag_httpd_refuse_fn refuse; /* may be NULL */
    void *arg;                 /* passed to the three */
    const char *name;          /* for log lines ("mcp", "e2b") */
    ag_httpd_limits_t limits;  /* start from ag_httpd_limits_default */
} ag_httpd_opts_t;

/* Listen and serve. NULL + err ERR_IO when the address cannot be bound,
 * ERR_USAGE for limits out of range. */
ag_httpd_t *ag_httpd_start(const ag_httpd_opts_t *o, err_t *err);
/* The port bound (the one picked for port 0). */
unsigned ag_httpd_port(const ag_httpd_t *d);
/* From now on refuse new requests (503) and answer queued ones 503;
 * returns at once (running handlers go on). */
void ag_httpd_shutdown(ag_httpd_t *d);
/* ag_httpd_shutdown, then wait for running
 * handlers and open streams (make them end: e.g. end the work they wait
 * for), close every connection and free. NULL-safe. */
void ag_httpd_stop(ag_httpd_t **pd);

/* ---- the request (its owner only) ------------------------------------ */
/* The strings these return belong to `req`: they go with it when it is
 * handed back (copy what is needed after ag_httpd_reply/ag_httpd_stream). */

const char *ag_httpd_method(const ag_httpd_req_t *req);
/* The path, without the query string. */
const char *ag_httpd_path(const ag_httpd_req_t *req);
/* A request header by name (any case), or NULL. */
const char *ag_httpd_header(const ag_httpd_req_t *req, const char *name);
/* A query argument (decoded), or NULL; "" for `?flag`. */
const char *ag_httpd_query(const ag_httpd_req_t *req, const char *name);
/* The body (NUL-terminated, *len bytes, "" if none): in handle only. */
const char *ag_httpd_body(const ag_httpd_req_t *req, size_t *len);
/* The peer's address as text ("127.0.0.1"). */
const char *ag_httpd_peer(const ag_httpd_req_t *req);

/* Add a header to the answer (before ag_httpd_reply or ag_httpd_stream;
 * copied). */
void ag_httpd_add_header(ag_httpd_req_t *req, const char *name,
                         const char *value);
/* Answer with `len` bytes of `body` (copied; NULL: empty) and Content-Type
 * `type` (NULL: none). Hands `req` back: do not touch it afterwards. */
void ag_httpd_reply(ag_httpd_req_t *req, unsigned status, const char *type,
                    const char *body, size_t len);

/* ---- streamed answers ------------------------------------------------- */

/* Answer with a body of unknown length (chunked), written with
 * ag_httpd_stream_write from the worker or any one thread. In handle
 * only. `keepalive` (may be NULL) is sent whenever the stream was silent
 * for keepalive_ms (": keepalive\n\n" for server-sent events). Hands
 * `req` back like ag_httpd_reply; the stream stays the caller's until
 * ag_httpd_stream_close. */
ag_httpd_stream_t *ag_httpd_stream(ag_httpd_req_t *req, unsigned status,
                                   const char *type, const char *keepalive);
/* Queue `len` bytes. Waits while stream_buffer bytes are unsent; returns
 * 0, or -1 once the client is gone (its connection closed or timed out)
 * or the server stops: the caller may stop its work. */
int ag_httpd_stream_write(ag_httpd_stream_t *st, const void *data, size_t len);
/* Has the client gone away? */
bool ag_httpd_stream_gone(ag_httpd_stream_t *st);
/* End the stream (the client gets the end of the body once the queued
 * bytes are sent) and let go of it. NULL-safe; *pst = NULL. */
void ag_httpd_stream_close(ag_httpd_stream_t **pst);

#endif
