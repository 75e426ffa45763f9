#include "agent/mcp/ag_mcp_http.h"

#include "agent/mcp/ag_mcp_rpc.h"
#include "agent/mcp/ag_mcp_server.h"
#include "agent/mcp/ag_mcp_sessions.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ENDPOINT "/mcp"
/* Seconds a connection may stay silent while its answer is written (a
 * client that never reads it). SSE streams send a comment more often. */
#define CONN_TIMEOUT_S 60
#define SSE_KEEPALIVE_S 15
/* From the connection (or the end of its last answer) to the end of the
 * request's headers, and to the end of its body: a client that trickles
 * them is cut off there, however often it sends a byte. */
#define HEADER_DEADLINE_S 10
#define REQUEST_DEADLINE_S 120
/* Connections at once (fewer when RLIMIT_NOFILE is low), and from one
 * address. A connection costs a socket and a little memory, no thread. */
#define MAX_CONNECTIONS 1024
#define PEER_MAX_CONNECTIONS 256
/* Connections still sending their request, from one address and from
 * all: a new one beyond either closes the oldest such (so half-open
 * connections cannot keep a real client out: its request completes
 * within milliseconds of connecting). */
#define PEER_MAX_PENDING 32
#define MAX_PENDING 512
/* Requests being handled at once, each on a thread of its own (waiting
 * for its session, or for a cell); 503 beyond. */
#define MAX_INFLIGHT 128
/* ... of them for one session (a cancellation is never refused): one
 * session's queue cannot take every worker. */
#define SESSION_MAX_INFLIGHT 8

typedef struct s_stream s_stream_t;

/* Where a connection is in its current request. */
typedef enum s_phase {
    S_HEADERS, /* waiting for (the rest of) a request's headers */
    S_BODY,    /* headers in, receiving the body */
    S_BUSY     /* the request is in: being handled or answered */
} s_phase_t;

/* One TCP connection (MHD's socket context), in s_http.conns. */
typedef struct s_conn {
    struct s_conn *prev, *next;
    int fd;           /* MHD's socket: shut down (never closed) by us */
    uint32_t peer;    /* IPv4 address, network order */
    s_phase_t phase;  /* see s_phase_t */
    int64_t since_ms; /* when the current request began (S_HEADERS) */
    bool cut;         /* we shut it down: MHD closes it next */
} s_conn_t;

/* Requests in progress for one MCP-Session-Id, in s_http.busy. */
typedef struct s_busy {
    struct s_busy *next;
    char sid[AG_MCP_SESSION_ID_LEN + 1];
    int n; /* workers for it; the entry goes at 0 */
} s_busy_t;

typedef struct s_http {
    const ag_mcp_config_t *cfg;
    const ag_mcp_http_opts_t *o;
    ag_mcp_sessions_t *sessions;
    char *token;          /* owned bearer token, or NULL */
    size_t token_len;     /* bytes of token */
    pthread_mutex_t lock; /* guards the fields below */
    pthread_cond_t idle;  /* inflight went to 0 */
    s_conn_t *conns;      /* every open connection */
    s_stream_t *streams;  /* SSE streams whose response is queued */
    int inflight;         /* worker threads running */
    s_busy_t *busy;       /* per session id, those with workers */
    bool stopping;        /* refuse new requests */
} s_http_t;

/* An answer, built off the event loop and queued by it. */
typedef struct s_resp {
    unsigned status;
    const char *type;                    /* static, or NULL */
    char *body;                          /* owned, or NULL */
    char sid[AG_MCP_SESSION_ID_LEN + 1]; /* MCP-Session-Id to send, or "" */
    s_stream_t *stream; /* a reference: an SSE stream instead of body */
} s_resp_t;

/* Where a request is: receiving, handed to a worker, answered. */
typedef enum s_state { S_RECEIVING, S_WORKING, S_ANSWERED } s_state_t;

/* One request being received or handled (MHD's con_cls). */
typedef struct s_req {
    s_http_t *h;              /* borrowed */
    struct MHD_Connection *c; /* valid while suspended */
    buf_t body;               /* the POST body so far (capped) */
    bool too_big;             /* the body passed AG_MCP_MAX_MESSAGE */
    size_t seen;              /* bytes of body offered, kept or not */
    char *sid, *pv;           /* owned copies of MCP-Session-Id and
                                 MCP-Protocol-Version, or NULL */
    bool sse;                 /* the client accepts text/event-stream */
    s_busy_t *slot;           /* its session's count, or NULL */
    pthread_mutex_t lock;     /* guards state, suspended and resp */
    s_state_t state;
    bool suspended; /* MHD_suspend_connection'ed, not yet resumed */
    s_resp_t resp;  /* the answer, once S_ANSWERED */
} s_req_t;

/* ---- connections ---------------------------------------------------- */

static s_conn_t *
s_conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* Shut `k` down (h->lock held). MHD closes its fd only after telling
 * s_notify (which takes h->lock), so the fd is still that socket. */
static void
s_cut(s_conn_t *k, const char *why)
{
    char addr[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &k->peer, addr, sizeof addr);
    log_info("mcp: closing a connection from %s: %s", addr, why);
    shutdown(k->fd, SHUT_RDWR);
    k->cut = true;
}

/* A new connection from `k->peer`: make room among those still sending
 * a request (h->lock held). */
static void
s_make_room(s_http_t *h, const s_conn_t *k)
{
    s_conn_t *oldest_peer = NULL, *oldest = NULL;
    int from_peer = 0, all = 0;
    for (s_conn_t *x = h->conns; x; x = x->next) {
        if (x->cut || x->phase == S_BUSY)
            continue;
        all++;
        if (!oldest || x->since_ms <= oldest->since_ms)
            oldest = x;
        if (x->peer != k->peer)
            continue;
        from_peer++;
        if (!oldest_peer || x->since_ms <= oldest_peer->since_ms)
            oldest_peer = x;
    }
    if (from_peer >= PEER_MAX_PENDING)
        s_cut(oldest_peer, "the oldest of too many incomplete requests from "
                           "one address");
    else if (all >= MAX_PENDING)
        s_cut(oldest, "the oldest of too many incomplete requests");
}

static void
s_notify(void *cls, struct MHD_Connection *c, void **socket_context,
         enum MHD_ConnectionNotificationCode code)
{
    s_http_t *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        s_conn_t *k = xcalloc(1, sizeof *k);
        k->fd = fi ? fi->connect_fd : -1;
        if (ai && ai->client_addr && ai->client_addr->sa_family == AF_INET)
            k->peer =
                ((const struct sockaddr_in *)(const void *)ai->client_addr)
                    ->sin_addr.s_addr;
        k->phase = S_HEADERS;
        k->since_ms = clock_mono_ms();
        pthread_mutex_lock(&h->lock);
        s_make_room(h, k);
        k->next = h->conns;
        if (h->conns)
            h->conns->prev = k;
        h->conns = k;
        pthread_mutex_unlock(&h->lock);
        *socket_context = k;
        return;
    }
    s_conn_t *k = *socket_context;
    if (!k)
        return;
    pthread_mutex_lock(&h->lock);
    if (k->prev)
        k->prev->next = k->next;
    else
        h->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    pthread_mutex_unlock(&h->lock);
    free(k);
    *socket_context = NULL;
}

static void
s_set_phase(s_http_t *h, struct MHD_Connection *c, s_phase_t phase)
{
    s_conn_t *k = s_conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&h->lock);
    k->phase = phase;
    if (phase == S_HEADERS)
        k->since_ms = clock_mono_ms();
    pthread_mutex_unlock(&h->lock);
}

/* Cut the connections past their header or request deadline. */
static void
s_sweep_conns(s_http_t *h)
{
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&h->lock);
    for (s_conn_t *k = h->conns; k; k = k->next) {
        if (k->cut || k->phase == S_BUSY)
            continue;
        if (k->phase == S_HEADERS &&
            now - k->since_ms > HEADER_DEADLINE_S * 1000)
            s_cut(k, "its request headers did not arrive within "
                     "10 s");
        else if (k->phase == S_BODY &&
                 now - k->since_ms > REQUEST_DEADLINE_S * 1000)
            s_cut(k, "its request did not arrive within 120 s");
    }
    pthread_mutex_unlock(&h->lock);
}

/* ---- responses -------------------------------------------------------- */

static void
s_resp_set(s_resp_t *r, unsigned status, const char *type, char *body,
           const char *session_id)
{
    free(r->body);
    r->status = status;
    r->type = type;
    r->body = body;
    snprintf(r->sid, sizeof r->sid, "%s", session_id ? session_id : "");
}

static void
s_resp_json(s_resp_t *r, unsigned status, const json_t *msg,
            const char *session_id)
{
    s_resp_set(r, status, "application/json", ag_mcp_dump(msg), session_id);
}

/* An HTTP-level refusal with a JSON-RPC error body saying why. */
static void s_refuse(s_resp_t *r, unsigned status, int code, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));

static void
s_refuse(s_resp_t *r, unsigned status, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    log_info("mcp: HTTP %u: %s", status, text);
    json_t *e = ag_mcp_error(NULL, code, "%s", text);
    free(text);
    s_resp_json(r, status, e, NULL);
    json_decref(e);
}

/* ---- checks ----------------------------------------------------------- */

bool
ag_mcp_http_origin_ok(const char *origin, const char *const *extra, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(origin, extra[i]) == 0)
            return true;
    static const char *const schemes[] = {"http://", "https://"};
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < 2; i++) {
        size_t sl = strlen(schemes[i]);
        if (strncmp(origin, schemes[i], sl) != 0)
            continue;
        for (size_t j = 0; j < 3; j++) {
            const char *h = origin + sl;
            size_t hl = strlen(hosts[j]);
            if (strncmp(h, hosts[j], hl) != 0)
                continue;
            const char *rest = h + hl;
            if (*rest == '\0')
                return true;
            if (*rest != ':' || !rest[1])
                continue;
            bool digits = true;
            for (const char *d = rest + 1; *d; d++)
                digits = digits && *d >= '0' && *d <= '9';
            if (digits && strlen(rest + 1) <= 5)
                return true;
        }
    }
    return false;
}

static bool
s_token_ok(s_http_t *h, struct MHD_Connection *c)
{
    if (!h->token)
        return true;
    const char *auth =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return false;
    const char *got = auth + 7;
    /* Constant time over the token's length; a different length fails
     * (and says nothing about the token's bytes). */
    return strlen(got) == h->token_len &&
           sodium_memcmp(got, h->token, h->token_len) == 0;
}

static bool
s_accepts(struct MHD_Connection *c, const char *type)
{
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
    return a && (strstr(a, type) || strstr(a, "*/*"));
}

/* ---- SSE: a tools/call that reports progress -------------------------- */

/* The stream's bytes go out from the event loop: s_stream_read never
 * waits; with nothing to send it suspends the connection, and the worker
 * (a new event) or the keep-alive sweep resumes it. */
struct s_stream {
    s_stream_t *prev, *next;  /* in h->streams while its response lives */
    pthread_mutex_t lock;     /* guards everything below */
    buf_t pending;            /* SSE bytes not yet taken by the connection */
    bool done;                /* the response is in pending */
    int refs;                 /* worker + response */
    bool suspended;           /* the connection waits for bytes */
    struct MHD_Connection *c; /* valid while suspended */
    int64_t sent_ms;          /* when bytes last went out */
};

static s_stream_t *
s_stream_new(void)
{
    s_stream_t *st = xcalloc(1, sizeof *st);
    pthread_mutex_init(&st->lock, NULL);
    buf_init(&st->pending, 0);
    st->refs = 2;
    st->sent_ms = clock_mono_ms();
    return st;
}

static void
s_stream_unref(s_stream_t *st)
{
    pthread_mutex_lock(&st->lock);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->lock);
    if (!last)
        return;
    buf_release(&st->pending);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* st->lock held. */
static void
s_stream_wake(s_stream_t *st)
{
    if (!st->suspended)
        return;
    st->suspended = false;
    MHD_resume_connection(st->c);
}

static void
s_stream_push(s_stream_t *st, const json_t *msg, bool last)
{
    char *line = msg ? ag_mcp_dump(msg) : NULL;
    pthread_mutex_lock(&st->lock);
    if (line)
        buf_printf(&st->pending, "event: message\ndata: %s\n\n", line);
    if (last)
        st->done = true;
    s_stream_wake(st);
    pthread_mutex_unlock(&st->lock);
    free(line);
}

static void
s_stream_send(void *arg, const json_t *msg)
{
    s_stream_push(arg, msg, false);
}

/* The response is gone (sent, or the connection closed). */
typedef struct s_stream_ref {
    s_http_t *h;
    s_stream_t *st;
} s_stream_ref_t;

static ssize_t
s_stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    s_stream_t *st = ((s_stream_ref_t *)cls)->st;
    pthread_mutex_lock(&st->lock);
    ssize_t n;
    if (st->pending.len == 0) {
        if (st->done) {
            n = MHD_CONTENT_READER_END_OF_STREAM;
        } else {
            st->suspended = true;
            MHD_suspend_connection(st->c);
            n = 0;
        }
    } else {
        size_t k = st->pending.len < max ? st->pending.len : max;
        memcpy(out, st->pending.data, k);
        memmove(st->pending.data, st->pending.data + k, st->pending.len - k);
        st->pending.len -= k;
        st->pending.data[st->pending.len] = '\0';
        st->sent_ms = clock_mono_ms();
        n = (ssize_t)k;
    }
    pthread_mutex_unlock(&st->lock);
    return n;
}

static void
s_stream_free(void *cls)
{
    s_stream_ref_t *ref = cls;
    s_http_t *h = ref->h;
    s_stream_t *st = ref->st;
    pthread_mutex_lock(&h->lock);
    if (st->prev)
        st->prev->next = st->next;
    else
        h->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    pthread_mutex_unlock(&h->lock);
    s_stream_unref(st);
    free(ref);
}

/* A comment on every stream that sent nothing for SSE_KEEPALIVE_S. */
static void
s_sweep_streams(s_http_t *h)
{
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&h->lock);
    for (s_stream_t *st = h->streams; st; st = st->next) {
        pthread_mutex_lock(&st->lock);
        if (st->suspended && now - st->sent_ms >= SSE_KEEPALIVE_S * 1000) {
            buf_puts(&st->pending, ": keepalive\n\n");
            s_stream_wake(st);
        }
        pthread_mutex_unlock(&st->lock);
    }
    pthread_mutex_unlock(&h->lock);
}

/* Queue `r` on `c` (from the event loop); a stream moves to the
 * response. */
static enum MHD_Result
s_queue(s_http_t *h, struct MHD_Connection *c, s_resp_t *r)
{
    struct MHD_Response *mr;
    if (r->stream) {
        s_stream_t *st = r->stream;
        s_stream_ref_t *ref = xcalloc(1, sizeof *ref);
        *ref = (s_stream_ref_t){h, st};
        pthread_mutex_lock(&st->lock);
        st->c = c;
        pthread_mutex_unlock(&st->lock);
        mr = MHD_create_response_from_callback(
            MHD_SIZE_UNKNOWN, 16384, s_stream_read, ref, s_stream_free);
        r->stream = NULL;
        if (!mr) {
            s_stream_unref(st);
            free(ref);
            return MHD_NO;
        }
        pthread_mutex_lock(&h->lock);
        st->next = h->streams;
        if (h->streams)
            h->streams->prev = st;
        h->streams = st;
        pthread_mutex_unlock(&h->lock);
        MHD_add_response_header(mr, "Content-Type", "text/event-stream");
        MHD_add_response_header(mr, "Cache-Control", "no-cache");
    } else {
        const char *body = r->body ? r->body : "";
        mr = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                             MHD_RESPMEM_MUST_COPY);
        if (!mr)
            return MHD_NO;
        if (r->type)
            MHD_add_response_header(mr, "Content-Type", r->type);
    }
    if (r->sid[0])
        MHD_add_response_header(mr, "MCP-Session-Id", r->sid);
    if (r->status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(mr, "Allow", "POST, DELETE");
    if (r->status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(mr, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, r->status, mr);
    MHD_destroy_response(mr);
    return ret;
}

/* Refuse now, from the event loop. */
static enum MHD_Result s_refuse_now(s_http_t *h, struct MHD_Connection *c,
                                    unsigned status, int code, const char *fmt,
                                    ...) __attribute__((format(printf, 5, 6)));

static enum MHD_Result
s_refuse_now(s_http_t *h, struct MHD_Connection *c, unsigned status, int code,
             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    s_resp_t r = {0};
    s_refuse(&r, status, code, "%s", text);
    free(text);
    enum MHD_Result ret = s_queue(h, c, &r);
    free(r.body);
    return ret;
}

/* The worker is done with `req` (the answer is in req->resp): let the
 * event loop queue it. `req` may be freed as soon as this returns. */
static void
s_answer(s_req_t *req)
{
    pthread_mutex_lock(&req->lock);
    req->state = S_ANSWERED;
    if (req->suspended) {
        req->suspended = false;
        MHD_resume_connection(req->c);
    }
    pthread_mutex_unlock(&req->lock);
}

/* Answer `msg` on session `s` (acquired; released here) as an SSE stream:
 * the stream is the answer at once, then the call runs and feeds it. */
static void
s_reply_stream(s_http_t *h, s_req_t *req, ag_mcp_session_t *s,
               const json_t *msg)
{
    s_stream_t *st = s_stream_new();
    req->resp.status = MHD_HTTP_OK;
    req->resp.stream = st;
    snprintf(req->resp.sid, sizeof req->resp.sid, "%s", ag_mcp_session_id(s));
    s_answer(req);
    ag_mcp_io_t io = {.send = s_stream_send, .arg = st};
    json_t *resp = ag_mcp_session_handle(s, msg, &io);
    ag_mcp_sessions_release(h->sessions, s, true);
    /* NULL: cancelled, the stream ends without a response. */
    s_stream_push(st, resp, true);
    json_decref(resp);
    s_stream_unref(st);
}

/* ---- POST --------------------------------------------------------------- */

static bool
s_is_method(const json_t *msg, const char *method)
{
    const char *m = json_string_value(json_object_get(msg, "method"));
    return m && strcmp(m, method) == 0;
}

static void
s_initialize(s_http_t *h, s_resp_t *out, const json_t *msg)
{
    ag_mcp_server_t *server = ag_mcp_server_new(h->cfg);
    json_t *resp = ag_mcp_server_handle(server, msg, NULL);
    if (!ag_mcp_server_version(server)) { /* refused: no session */
        ag_mcp_server_destroy(&server);
        s_resp_json(out, MHD_HTTP_OK, resp, NULL);
        json_decref(resp);
        return;
    }
    ag_mcp_session_t *s = ag_mcp_sessions_add(h->sessions, &server);
    if (!s) {
        json_decref(resp);
        s_refuse(out, MHD_HTTP_SERVICE_UNAVAILABLE, AG_MCP_INTERNAL_ERROR,
                 "too many sessions: this server allows %d at once "
                 "(--max-sessions); end one with DELETE or try later",
                 h->o->max_sessions);
        return;
    }
    log_info("mcp: new session %.8s… (%d live)", ag_mcp_session_id(s),
             ag_mcp_sessions_count(h->sessions));
    s_resp_json(out, MHD_HTTP_OK, resp, ag_mcp_session_id(s));
    json_decref(resp);
    ag_mcp_sessions_release(h->sessions, s, true);
}

/* Handle the request in `req` (on a worker thread). Returns true when
 * the answer was already handed over (a stream: req may be gone). */
static bool
s_post(s_http_t *h, s_req_t *req)
{
    s_resp_t *out = &req->resp;
    json_t *perr = NULL;
    json_t *msg = ag_mcp_parse(req->body.data ? req->body.data : "",
                               req->body.len, &perr);
    if (!msg) {
        s_resp_json(out, MHD_HTTP_BAD_REQUEST, perr, NULL);
        json_decref(perr);
        return false;
    }
    const char *sid = req->sid;
    bool answered = false;
    if (s_is_method(msg, "initialize") && !sid) {
        s_initialize(h, out, msg);
        goto out;
    }
    if (!sid) {
        s_refuse(out, MHD_HTTP_BAD_REQUEST, AG_MCP_INVALID_REQUEST,
                 "Bad Request: no MCP-Session-Id header; send "
                 "initialize first and then the id it returned");
        goto out;
    }
    const char *pv = req->pv;
    if (pv && !ag_mcp_version_supported(pv)) {
        s_refuse(out, MHD_HTTP_BAD_REQUEST, AG_MCP_INVALID_REQUEST,
                 "Bad Request: unsupported MCP-Protocol-Version %.100s; "
                 "this server speaks %s, %s and %s",
                 pv, ag_mcp_versions[0], ag_mcp_versions[1],
                 ag_mcp_versions[2]);
        goto out;
    }
    /* A cancellation must not wait for the request it cancels. */
    const json_t *rid =
        json_object_get(json_object_get(msg, "params"), "requestId");
    bool cancel = s_is_method(msg, "notifications/cancelled") &&
                  !json_object_get(msg, "id") && rid;
    ag_mcp_session_t *s = ag_mcp_sessions_acquire(h->sessions, sid, !cancel);
    if (!s) {
        s_refuse(out, MHD_HTTP_NOT_FOUND, AG_MCP_INVALID_REQUEST,
                 "Not Found: no live session has this MCP-Session-Id "
                 "(it ended or never existed); initialize a new one");
        goto out;
    }
    /* A supported MCP-Protocol-Version other than the negotiated one is
     * accepted, as the reference SDK server does (the conformance suite
     * sends 2025-03-26 on a 2025-11-25 session). */
    ag_mcp_server_t *server = ag_mcp_session_server(s);
    if (cancel) {
        ag_mcp_server_cancel(server, rid);
        ag_mcp_sessions_release(h->sessions, s, false);
        s_resp_set(out, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
        goto out;
    }
    json_t *token = json_object_get(
        json_object_get(json_object_get(msg, "params"), "_meta"),
        "progressToken");
    if (s_is_method(msg, "tools/call") && token && req->sse) {
        s_reply_stream(h, req, s, msg);
        answered = true;
        goto out;
    }
    json_t *resp = ag_mcp_session_handle(s, msg, NULL);
    ag_mcp_sessions_release(h->sessions, s, true);
    if (resp)
        s_resp_json(out, MHD_HTTP_OK, resp, NULL);
    else
        s_resp_set(out, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
    json_decref(resp);
out:
    json_decref(msg);
    return answered;
}

/* One worker fewer (for `slot`'s session, if not NULL). */
static void
s_worker_done(s_http_t *h, s_busy_t *slot)
{
    pthread_mutex_lock(&h->lock);
    if (slot && --slot->n == 0) {
        s_busy_t **pp = &h->busy;
        while (*pp != slot)
            pp = &(*pp)->next;
        *pp = slot->next;
        free(slot);
    }
    if (--h->inflight == 0)
        pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->lock);
}

static void *
s_worker(void *arg)
{
    s_req_t *req = arg;
    s_http_t *h = req->h;
    s_busy_t *slot = req->slot; /* req may be gone once answered */
    if (!s_post(h, req))
        s_answer(req);
    s_worker_done(h, slot);
    return NULL;
}

typedef enum s_start {
    S_STARTED,
    S_FULL,        /* MAX_INFLIGHT, or the server stops */
    S_SESSION_FULL /* SESSION_MAX_INFLIGHT for its session */
} s_start_t;

/* A worker for `req`, within the caps. */
static s_start_t
s_worker_start(s_http_t *h, s_req_t *req)
{
    /* A cancellation does not wait for its session: never refused for
     * its session's count. A session id of another length is 404 at
     * once. */
    bool count = req->sid && strlen(req->sid) == AG_MCP_SESSION_ID_LEN &&
                 !(req->body.data && memmem(req->body.data, req->body.len,
                                            "notifications/cancelled", 23));
    s_start_t why = S_STARTED;
    pthread_mutex_lock(&h->lock);
    s_busy_t *slot = NULL;
    for (slot = count ? h->busy : NULL; slot; slot = slot->next)
        if (strcmp(slot->sid, req->sid) == 0)
            break;
    if (h->stopping || h->inflight >= MAX_INFLIGHT)
        why = S_FULL;
    else if (slot && slot->n >= SESSION_MAX_INFLIGHT)
        why = S_SESSION_FULL;
    if (why == S_STARTED) {
        if (count && !slot) {
            slot = xcalloc(1, sizeof *slot);
            snprintf(slot->sid, sizeof slot->sid, "%s", req->sid);
            slot->next = h->busy;
            h->busy = slot;
        }
        if (slot)
            slot->n++;
        h->inflight++;
        req->slot = slot;
    }
    pthread_mutex_unlock(&h->lock);
    if (why != S_STARTED)
        return why;
    pthread_t tid;
    if (pthread_create(&tid, NULL, s_worker, req) != 0) {
        s_worker_done(h, req->slot);
        return S_FULL;
    }
    pthread_detach(tid);
    return S_STARTED;
}

/* ---- the handler (on the event loop: never waits) ----------------------- */

static char *
s_header_dup(struct MHD_Connection *c, const char *name)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
    return v ? xstrdup(v) : NULL;
}

/* The headers are in: refuse what needs no body before reading it. */
static enum MHD_Result
s_headers(s_http_t *h, struct MHD_Connection *c, s_req_t *req, const char *url,
          const char *method)
{
    const char *origin =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin && !ag_mcp_http_origin_ok(origin, h->o->origins, h->o->norigins))
        return s_refuse_now(h, c, MHD_HTTP_FORBIDDEN, AG_MCP_INVALID_REQUEST,
                            "Forbidden: Origin %.200s is not allowed "
                            "(--allow-origin)",
                            origin);
    if (!s_token_ok(h, c))
        return s_refuse_now(h, c, MHD_HTTP_UNAUTHORIZED, AG_MCP_INVALID_REQUEST,
                            "Unauthorized: send Authorization: Bearer TOKEN "
                            "(the token in the server's --token-file)");
    if (strcmp(url, ENDPOINT) != 0)
        return s_refuse_now(h, c, MHD_HTTP_NOT_FOUND, AG_MCP_INVALID_REQUEST,
                            "Not Found: the MCP endpoint is " ENDPOINT);
    if (strcmp(method, "GET") == 0)
        return s_refuse_now(h, c, MHD_HTTP_METHOD_NOT_ALLOWED,
                            AG_MCP_INVALID_REQUEST,
                            "Method Not Allowed: this server opens no "
                            "server-initiated stream; POST requests");
    pthread_mutex_lock(&h->lock);
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->lock);
    if (stopping)
        return s_refuse_now(h, c, MHD_HTTP_SERVICE_UNAVAILABLE,
                            AG_MCP_INTERNAL_ERROR,
                            "Service Unavailable: the server is stopping");
    if (strcmp(method, "DELETE") == 0) {
        /* Ending a session does not wait for its kernel (see
         * ag_mcp_sessions.h): answered right here. */
        const char *sid =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Session-Id");
        if (!sid)
            return s_refuse_now(h, c, MHD_HTTP_BAD_REQUEST,
                                AG_MCP_INVALID_REQUEST,
                                "Bad Request: DELETE needs MCP-Session-Id");
        if (ag_mcp_sessions_end(h->sessions, sid) < 0)
            return s_refuse_now(h, c, MHD_HTTP_NOT_FOUND,
                                AG_MCP_INVALID_REQUEST,
                                "Not Found: no live session has this "
                                "MCP-Session-Id");
        log_info("mcp: session %.8s… ended by the client", sid);
        s_resp_t r = {.status = MHD_HTTP_OK};
        return s_queue(h, c, &r);
    }
    if (strcmp(method, "POST") != 0)
        return s_refuse_now(h, c, MHD_HTTP_METHOD_NOT_ALLOWED,
                            AG_MCP_INVALID_REQUEST,
                            "Method Not Allowed: use POST or DELETE");
    const char *len =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (len && strtoull(len, NULL, 10) > AG_MCP_MAX_MESSAGE)
        return s_refuse_now(h, c, MHD_HTTP_CONTENT_TOO_LARGE,
                            AG_MCP_INVALID_REQUEST,
                            "message of %.30s bytes refused: the limit is %zu "
                            "bytes (8 MiB)",
                            len, AG_MCP_MAX_MESSAGE);
    const char *ctype =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (!ctype || strncasecmp(ctype, "application/json", 16) != 0)
        return s_refuse_now(
            h, c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, AG_MCP_INVALID_REQUEST,
            "POST bodies must be Content-Type: application/json");
    if (!s_accepts(c, "application/json") && !s_accepts(c, "text/event-stream"))
        return s_refuse_now(h, c, MHD_HTTP_NOT_ACCEPTABLE,
                            AG_MCP_INVALID_REQUEST,
                            "the client must accept application/json and "
                            "text/event-stream");
    req->sid = s_header_dup(c, "MCP-Session-Id");
    req->pv = s_header_dup(c, "MCP-Protocol-Version");
    req->sse = s_accepts(c, "text/event-stream");
    return MHD_YES;
}

static enum MHD_Result
s_handler(void *cls, struct MHD_Connection *c, const char *url,
          const char *method, const char *version, const char *upload,
          size_t *upload_size, void **con_cls)
{
    (void)version;
    s_http_t *h = cls;
    s_req_t *req = *con_cls;
    if (!req) {
        req = xcalloc(1, sizeof *req);
        req->h = h;
        req->c = c;
        buf_init(&req->body, AG_MCP_MAX_MESSAGE);
        pthread_mutex_init(&req->lock, NULL);
        *con_cls = req;
        s_set_phase(h, c, S_BODY);
        return s_headers(h, c, req, url, method);
    }
    if (*upload_size) {
        req->seen += *upload_size;
        if (!req->too_big && buf_append(&req->body, upload, *upload_size) < 0) {
            req->too_big = true;
            buf_release(&req->body);
            buf_init(&req->body, AG_MCP_MAX_MESSAGE);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&req->lock);
    s_state_t state = req->state;
    pthread_mutex_unlock(&req->lock);
    if (state == S_ANSWERED) /* the worker let go of req */
        return s_queue(h, c, &req->resp);
    if (state == S_WORKING)
        return MHD_YES;
    s_set_phase(h, c, S_BUSY);
    if (req->too_big)
        return s_refuse_now(h, c, MHD_HTTP_CONTENT_TOO_LARGE,
                            AG_MCP_INVALID_REQUEST,
                            "message of %zu bytes refused: the limit is %zu "
                            "bytes (8 MiB)",
                            req->seen, AG_MCP_MAX_MESSAGE);
    /* The worker answers under req->lock: it cannot resume before we
     * suspend. */
    pthread_mutex_lock(&req->lock);
    s_start_t started = s_worker_start(h, req);
    if (started != S_STARTED) {
        pthread_mutex_unlock(&req->lock);
        if (started == S_SESSION_FULL)
            return s_refuse_now(
                h, c, MHD_HTTP_SERVICE_UNAVAILABLE, AG_MCP_INTERNAL_ERROR,
                "Service Unavailable: this session already has %d requests "
                "in progress, the most one session may; wait for their "
                "answers",
                SESSION_MAX_INFLIGHT);
        return s_refuse_now(h, c, MHD_HTTP_SERVICE_UNAVAILABLE,
                            AG_MCP_INTERNAL_ERROR,
                            "Service Unavailable: %d requests are being "
                            "handled, the most this server takes at once; "
                            "try again shortly",
                            MAX_INFLIGHT);
    }
    req->state = S_WORKING;
    req->suspended = true;
    MHD_suspend_connection(c);
    pthread_mutex_unlock(&req->lock);
    return MHD_YES;
}

static void
s_completed(void *cls, struct MHD_Connection *c, void **con_cls,
            enum MHD_RequestTerminationCode why)
{
    (void)why;
    s_http_t *h = cls;
    s_set_phase(h, c, S_HEADERS); /* the next request's deadline starts */
    s_req_t *req = *con_cls;
    if (!req)
        return;
    if (req->resp.stream) /* answered, never queued */
        s_stream_unref(req->resp.stream);
    free(req->resp.body);
    buf_release(&req->body);
    free(req->sid);
    free(req->pv);
    pthread_mutex_destroy(&req->lock);
    free(req);
    *con_cls = NULL;
}

static void
s_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    log_info("mcp: http: %s", line);
}

/* ---- setup ------------------------------------------------------------- */

static int
s_parse_listen(const char *spec, struct sockaddr_in *sa, err_t *err)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    const char *colon = strrchr(spec, ':');
    const char *port = colon ? colon + 1 : spec;
    char addr[64] = "127.0.0.1";
    if (colon) {
        size_t n = (size_t)(colon - spec);
        if (n == 0 || n >= sizeof addr)
            return err_set(err, ERR_USAGE, "--http %s: give [ADDR:]PORT", spec);
        memcpy(addr, spec, n);
        addr[n] = '\0';
        if (strcmp(addr, "localhost") == 0)
            snprintf(addr, sizeof addr, "127.0.0.1");
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        return err_set(err, ERR_USAGE,
                       "--http %s: the port must be a number from 0 to 65535",
                       spec);
    if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1)
        return err_set(err, ERR_USAGE, "--http %s: %s is not an IPv4 address",
                       spec, addr);
    sa->sin_port = htons((uint16_t)p);
    return 0;
}

static int
s_read_token(s_http_t *h, const char *path, err_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return err_set(err, ERR_USAGE, "--token-file %s: %s", path,
                       strerror(errno));
    char line[1024];
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    if (ok)
        line[strcspn(line, "\r\n")] = '\0';
    if (!ok || strlen(line) < 16) {
        sodium_memzero(line, sizeof line);
        return err_set(err, ERR_USAGE,
                       "--token-file %s: its first line must hold a token of "
                       "at least 16 characters (e.g. from 'openssl rand -hex "
                       "32')",
                       path);
    }
    h->token = xstrdup(line);
    h->token_len = strlen(line);
    sodium_memzero(line, sizeof line);
    return 0;
}

/* How many connections the fd limit leaves room for. */
static unsigned
s_max_connections(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return MAX_CONNECTIONS;
    rlim_t room = rl.rlim_cur > 192 ? rl.rlim_cur - 128 : 64;
    return room < MAX_CONNECTIONS ? (unsigned)room : MAX_CONNECTIONS;
}

int
ag_mcp_http_run(const ag_mcp_config_t *cfg, const ag_mcp_http_opts_t *o,
                volatile sig_atomic_t *stop, err_t *err)
{
    if (sodium_init() < 0)
        return err_set(err, ERR_IO, "libsodium could not be initialised");
    struct sockaddr_in sa;
    if (s_parse_listen(o->listen, &sa, err) < 0)
        return -1;
    s_http_t h = {.cfg = cfg, .o = o};
    bool loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    if (o->token_file && s_read_token(&h, o->token_file, err) < 0)
        return -1;
    if (!loopback && !h.token)
        return err_set(err, ERR_USAGE,
                       "--http %s: listening beyond loopback needs "
                       "--token-file (a bearer token clients must send)",
                       o->listen);
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.idle, NULL);
    h.sessions =
        ag_mcp_sessions_new(o->max_sessions, cfg->session->idle_timeout_ms,
                            cfg->session->max_lifetime_ms);
    /* One event loop (epoll) for every connection; requests run on
     * workers while their connection is suspended. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, s_handler, &h, MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_LIMIT, s_max_connections(),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PEER_MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
        MHD_OPTION_NOTIFY_COMPLETED, s_completed, &h,
        MHD_OPTION_NOTIFY_CONNECTION, s_notify, &h, MHD_OPTION_END);
    int rc = 0;
    if (!d) {
        rc = err_set(err, ERR_IO, "--http %s: cannot listen there: %s",
                     o->listen, strerror(errno));
        goto out;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char addr[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
    fprintf(stderr,
            "jupyter-agent mcp: listening on http://%s:%u" ENDPOINT "\n", addr,
            info ? info->port : ntohs(sa.sin_port));
    fflush(stderr);
    for (int tick = 0; !(stop && *stop); tick++) {
        usleep(250 * 1000);
        s_sweep_conns(&h);
        s_sweep_streams(&h);
        if (tick % 4 == 0)
            ag_mcp_sessions_expire(h.sessions);
    }
    log_info("mcp: stopping: ending %d sessions",
             ag_mcp_sessions_count(h.sessions));
    pthread_mutex_lock(&h.lock);
    h.stopping = true;
    pthread_mutex_unlock(&h.lock);
    ag_mcp_sessions_end_all(h.sessions);
    /* MHD must not stop with a connection suspended: every worker
     * answers (and resumes its connection) first. */
    pthread_mutex_lock(&h.lock);
    while (h.inflight > 0)
        pthread_cond_wait(&h.idle, &h.lock);
    pthread_mutex_unlock(&h.lock);
    MHD_stop_daemon(d);
out:
    ag_mcp_sessions_destroy(&h.sessions);
    pthread_cond_destroy(&h.idle);
    pthread_mutex_destroy(&h.lock);
    if (h.token)
        sodium_memzero(h.token, h.token_len);
    free(h.token);
    return rc;
}
