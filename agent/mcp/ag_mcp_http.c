#include "agent/mcp/ag_mcp_http.h"

#include "agent/mcp/ag_mcp_rpc.h"
#include "agent/mcp/ag_mcp_server.h"
#include "agent/mcp/ag_mcp_sessions.h"
#include "common/buf.h"
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
#include <time.h>
#include <unistd.h>

#define ENDPOINT "/mcp"
/* Seconds a connection may stay silent before it is closed (a client
 * that never reads its answer). SSE streams send a comment more often. */
#define CONN_TIMEOUT_S 60
#define SSE_KEEPALIVE_S 15
#define MAX_CONNECTIONS 512
/* POST bodies held at once, over all connections: two messages at the
 * size cap. Each body is parsed within common/jsonlim's bound (its length
 * plus 4 MiB), so bodies and their trees together stay under ~40 MiB
 * however many clients send at once; a body that would pass this is
 * answered 503 and its bytes are discarded as they arrive. */
#define MAX_BODY_BYTES_IN_FLIGHT (2 * AG_MCP_MAX_MESSAGE)

typedef struct s_http {
    const ag_mcp_config_t *cfg;
    const ag_mcp_http_opts_t *o;
    ag_mcp_sessions_t *sessions;
    char *token;      /* owned bearer token, or NULL */
    size_t token_len; /* bytes of token */
    unsigned char token_hash[crypto_hash_sha256_BYTES]; /* SHA-256(token) */
    pthread_mutex_t lock;                               /* guards in_flight */
    size_t in_flight; /* body bytes held by all requests */
} s_http_t;

/* One request being received. */
typedef struct s_req {
    buf_t body;      /* the POST body so far (capped) */
    bool too_big;    /* the body passed AG_MCP_MAX_MESSAGE */
    bool busy;       /* it would pass MAX_BODY_BYTES_IN_FLIGHT */
    size_t seen;     /* bytes of body offered, kept or not */
    size_t reserved; /* of s_http_t.in_flight, this request's */
} s_req_t;

/* ---- responses -------------------------------------------------------- */

static enum MHD_Result
s_reply(struct MHD_Connection *c, unsigned status, const char *type,
        const char *body, const char *session_id)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        body ? strlen(body) : 0, (void *)(body ? body : ""),
        MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (type)
        MHD_add_response_header(r, "Content-Type", type);
    if (session_id)
        MHD_add_response_header(r, "MCP-Session-Id", session_id);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "POST, DELETE");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result
s_reply_json(struct MHD_Connection *c, unsigned status, const json_t *msg,
             const char *session_id)
{
    char *text = ag_mcp_dump(msg);
    enum MHD_Result ret =
        s_reply(c, status, "application/json", text, session_id);
    free(text);
    return ret;
}

/* An HTTP-level refusal with a JSON-RPC error body saying why. */
static enum MHD_Result s_refuse(struct MHD_Connection *c, unsigned status,
                                int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum MHD_Result
s_refuse(struct MHD_Connection *c, unsigned status, int code, const char *fmt,
         ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    log_info("mcp: HTTP %u: %s", status, text);
    json_t *e = ag_mcp_error(NULL, code, "%s", text);
    free(text);
    enum MHD_Result ret = s_reply_json(c, status, e, NULL);
    json_decref(e);
    return ret;
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
    /* Compared as SHA-256 digests, in constant time over their fixed
     * size: neither the token's bytes nor its length shape the time. */
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(hash, (const unsigned char *)got, strlen(got));
    return sodium_memcmp(hash, h->token_hash, sizeof hash) == 0;
}

/* Take `n` more body bytes for `req` from the shared allowance: false
 * (nothing taken) when that would pass MAX_BODY_BYTES_IN_FLIGHT. */
static bool
s_reserve(s_http_t *h, s_req_t *req, size_t n)
{
    pthread_mutex_lock(&h->lock);
    bool ok = n <= MAX_BODY_BYTES_IN_FLIGHT - h->in_flight;
    if (ok) {
        h->in_flight += n;
        req->reserved += n;
    }
    pthread_mutex_unlock(&h->lock);
    return ok;
}

static void
s_unreserve(s_http_t *h, s_req_t *req)
{
    pthread_mutex_lock(&h->lock);
    h->in_flight -= req->reserved;
    req->reserved = 0;
    pthread_mutex_unlock(&h->lock);
}

static bool
s_accepts(struct MHD_Connection *c, const char *type)
{
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
    return a && (strstr(a, type) || strstr(a, "*/*"));
}

/* ---- SSE: a tools/call that reports progress -------------------------- */

typedef struct s_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    buf_t pending;       /* SSE bytes not yet taken by the connection */
    bool done;           /* the response is in pending */
    int refs;            /* worker + connection */
    s_http_t *h;         /* borrowed */
    ag_mcp_session_t *s; /* acquired exclusively; the worker releases */
    json_t *msg;         /* owned request */
} s_stream_t;

static void
s_stream_unref(s_stream_t *st)
{
    pthread_mutex_lock(&st->lock);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->lock);
    if (!last)
        return;
    buf_release(&st->pending);
    json_decref(st->msg);
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static void
s_stream_push(s_stream_t *st, const json_t *msg, bool last)
{
    char *line = ag_mcp_dump(msg);
    pthread_mutex_lock(&st->lock);
    buf_printf(&st->pending, "event: message\ndata: %s\n\n", line);
    if (last)
        st->done = true;
    pthread_cond_signal(&st->cond);
    pthread_mutex_unlock(&st->lock);
    free(line);
}

static void
s_stream_send(void *arg, const json_t *msg)
{
    s_stream_push(arg, msg, false);
}

static void *
s_stream_worker(void *arg)
{
    s_stream_t *st = arg;
    ag_mcp_io_t io = {.send = s_stream_send, .arg = st};
    json_t *resp = ag_mcp_session_handle(st->s, st->msg, &io);
    ag_mcp_sessions_release(st->h->sessions, st->s, true);
    st->s = NULL;
    if (resp) {
        s_stream_push(st, resp, true);
    } else { /* cancelled: end the stream without a response */
        pthread_mutex_lock(&st->lock);
        st->done = true;
        pthread_cond_signal(&st->cond);
        pthread_mutex_unlock(&st->lock);
    }
    json_decref(resp);
    s_stream_unref(st);
    return NULL;
}

static ssize_t
s_stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    s_stream_t *st = cls;
    pthread_mutex_lock(&st->lock);
    while (st->pending.len == 0 && !st->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += SSE_KEEPALIVE_S;
        if (pthread_cond_timedwait(&st->cond, &st->lock, &ts) == ETIMEDOUT &&
            st->pending.len == 0 && !st->done) {
            buf_puts(&st->pending, ": keepalive\n\n");
            break;
        }
    }
    ssize_t n;
    if (st->pending.len == 0) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        size_t k = st->pending.len < max ? st->pending.len : max;
        memcpy(out, st->pending.data, k);
        memmove(st->pending.data, st->pending.data + k, st->pending.len - k);
        st->pending.len -= k;
        st->pending.data[st->pending.len] = '\0';
        n = (ssize_t)k;
    }
    pthread_mutex_unlock(&st->lock);
    return n;
}

static void
s_stream_free(void *cls)
{
    s_stream_unref(cls);
}

/* Answer `msg` on session `s` (acquired; released here) as an SSE stream. */
static enum MHD_Result
s_reply_stream(s_http_t *h, struct MHD_Connection *c, ag_mcp_session_t *s,
               json_t *msg)
{
    s_stream_t *st = xcalloc(1, sizeof *st);
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->cond, NULL);
    buf_init(&st->pending, 0);
    st->refs = 2;
    st->h = h;
    st->s = s;
    st->msg = json_incref(msg);
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16384, s_stream_read, st, s_stream_free);
    pthread_t tid;
    if (!r || pthread_create(&tid, NULL, s_stream_worker, st) != 0) {
        if (r)
            MHD_destroy_response(r);
        ag_mcp_sessions_release(h->sessions, s, true);
        st->refs = 1;
        s_stream_unref(st);
        return MHD_NO;
    }
    pthread_detach(tid);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "MCP-Session-Id", ag_mcp_session_id(s));
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- POST --------------------------------------------------------------- */

static bool
s_is_method(const json_t *msg, const char *method)
{
    const char *m = json_string_value(json_object_get(msg, "method"));
    return m && strcmp(m, method) == 0;
}

static enum MHD_Result
s_initialize(s_http_t *h, struct MHD_Connection *c, const json_t *msg)
{
    ag_mcp_server_t *server = ag_mcp_server_new(h->cfg);
    json_t *resp = ag_mcp_server_handle(server, msg, NULL);
    if (!ag_mcp_server_version(server)) { /* refused: no session */
        ag_mcp_server_destroy(&server);
        enum MHD_Result ret = s_reply_json(c, MHD_HTTP_OK, resp, NULL);
        json_decref(resp);
        return ret;
    }
    ag_mcp_session_t *s = ag_mcp_sessions_add(h->sessions, &server);
    if (!s) {
        json_decref(resp);
        return s_refuse(c, MHD_HTTP_SERVICE_UNAVAILABLE, AG_MCP_INTERNAL_ERROR,
                        "too many sessions: this server allows %d at once "
                        "(--max-sessions); end one with DELETE or try later",
                        h->o->max_sessions);
    }
    log_info("mcp: new session %.8s… (%d live)", ag_mcp_session_id(s),
             ag_mcp_sessions_count(h->sessions));
    enum MHD_Result ret =
        s_reply_json(c, MHD_HTTP_OK, resp, ag_mcp_session_id(s));
    json_decref(resp);
    ag_mcp_sessions_release(h->sessions, s, true);
    return ret;
}

static enum MHD_Result
s_post(s_http_t *h, struct MHD_Connection *c, s_req_t *req)
{
    const char *ctype =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (!ctype || strncasecmp(ctype, "application/json", 16) != 0)
        return s_refuse(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                        AG_MCP_INVALID_REQUEST,
                        "POST bodies must be Content-Type: application/json");
    if (!s_accepts(c, "application/json") && !s_accepts(c, "text/event-stream"))
        return s_refuse(c, MHD_HTTP_NOT_ACCEPTABLE, AG_MCP_INVALID_REQUEST,
                        "the client must accept application/json and "
                        "text/event-stream");
    if (req->too_big)
        return s_refuse(c, MHD_HTTP_CONTENT_TOO_LARGE, AG_MCP_INVALID_REQUEST,
                        "message of %zu bytes refused: the limit is %zu bytes "
                        "(8 MiB)",
                        req->seen, AG_MCP_MAX_MESSAGE);
    if (req->busy)
        return s_refuse(c, MHD_HTTP_SERVICE_UNAVAILABLE, AG_MCP_INVALID_REQUEST,
                        "Service Unavailable: other requests hold %zu MiB of "
                        "bodies; retry when they are answered",
                        MAX_BODY_BYTES_IN_FLIGHT >> 20);
    json_t *perr = NULL;
    json_t *msg = ag_mcp_parse(req->body.data ? req->body.data : "",
                               req->body.len, &perr);
    if (!msg) {
        enum MHD_Result ret = s_reply_json(c, MHD_HTTP_BAD_REQUEST, perr, NULL);
        json_decref(perr);
        return ret;
    }
    const char *sid =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Session-Id");
    enum MHD_Result ret;
    if (s_is_method(msg, "initialize") && !sid) {
        ret = s_initialize(h, c, msg);
        goto out;
    }
    if (!sid) {
        ret = s_refuse(c, MHD_HTTP_BAD_REQUEST, AG_MCP_INVALID_REQUEST,
                       "Bad Request: no MCP-Session-Id header; send "
                       "initialize first and then the id it returned");
        goto out;
    }
    const char *pv =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Protocol-Version");
    if (pv && !ag_mcp_version_supported(pv)) {
        ret = s_refuse(c, MHD_HTTP_BAD_REQUEST, AG_MCP_INVALID_REQUEST,
                       "Bad Request: unsupported MCP-Protocol-Version %s; "
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
        ret = s_refuse(c, MHD_HTTP_NOT_FOUND, AG_MCP_INVALID_REQUEST,
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
        ret = s_reply(c, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
        goto out;
    }
    json_t *token = json_object_get(
        json_object_get(json_object_get(msg, "params"), "_meta"),
        "progressToken");
    if (s_is_method(msg, "tools/call") && token &&
        s_accepts(c, "text/event-stream")) {
        ret = s_reply_stream(h, c, s, msg);
        goto out;
    }
    json_t *resp = ag_mcp_session_handle(s, msg, NULL);
    ag_mcp_sessions_release(h->sessions, s, true);
    if (resp)
        ret = s_reply_json(c, MHD_HTTP_OK, resp, NULL);
    else
        ret = s_reply(c, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
    json_decref(resp);
out:
    json_decref(msg);
    return ret;
}

/* ---- the handler --------------------------------------------------------- */

static enum MHD_Result
s_handler(void *cls, struct MHD_Connection *c, const char *url,
          const char *method, const char *version, const char *upload,
          size_t *upload_size, void **con_cls)
{
    (void)version;
    s_http_t *h = cls;
    s_req_t *req = *con_cls;
    if (!req) {
        /* Headers are in: refuse what needs no body before reading it. */
        req = xcalloc(1, sizeof *req);
        buf_init(&req->body, AG_MCP_MAX_MESSAGE);
        *con_cls = req;
        const char *origin =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        if (origin &&
            !ag_mcp_http_origin_ok(origin, h->o->origins, h->o->norigins))
            return s_refuse(c, MHD_HTTP_FORBIDDEN, AG_MCP_INVALID_REQUEST,
                            "Forbidden: Origin %.200s is not allowed "
                            "(--allow-origin)",
                            origin);
        if (!s_token_ok(h, c))
            return s_refuse(c, MHD_HTTP_UNAUTHORIZED, AG_MCP_INVALID_REQUEST,
                            "Unauthorized: send Authorization: Bearer TOKEN "
                            "(the token in the server's --token-file)");
        if (strcmp(url, ENDPOINT) != 0)
            return s_refuse(c, MHD_HTTP_NOT_FOUND, AG_MCP_INVALID_REQUEST,
                            "Not Found: the MCP endpoint is " ENDPOINT);
        if (strcmp(method, "GET") == 0)
            return s_refuse(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                            AG_MCP_INVALID_REQUEST,
                            "Method Not Allowed: this server opens no "
                            "server-initiated stream; POST requests");
        if (strcmp(method, "DELETE") == 0) {
            const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                          "MCP-Session-Id");
            if (!sid)
                return s_refuse(c, MHD_HTTP_BAD_REQUEST, AG_MCP_INVALID_REQUEST,
                                "Bad Request: DELETE needs MCP-Session-Id");
            if (ag_mcp_sessions_end(h->sessions, sid) < 0)
                return s_refuse(c, MHD_HTTP_NOT_FOUND, AG_MCP_INVALID_REQUEST,
                                "Not Found: no live session has this "
                                "MCP-Session-Id");
            log_info("mcp: session %.8s… ended by the client", sid);
            return s_reply(c, MHD_HTTP_OK, NULL, NULL, NULL);
        }
        if (strcmp(method, "POST") != 0)
            return s_refuse(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                            AG_MCP_INVALID_REQUEST,
                            "Method Not Allowed: use POST or DELETE");
        const char *len =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (len && strtoull(len, NULL, 10) > AG_MCP_MAX_MESSAGE)
            return s_refuse(c, MHD_HTTP_CONTENT_TOO_LARGE,
                            AG_MCP_INVALID_REQUEST,
                            "message of %s bytes refused: the limit is %zu "
                            "bytes (8 MiB)",
                            len, AG_MCP_MAX_MESSAGE);
        return MHD_YES;
    }
    if (*upload_size) {
        req->seen += *upload_size;
        if (!req->too_big && !req->busy && !s_reserve(h, req, *upload_size)) {
            req->busy = true;
            buf_release(&req->body);
            buf_init(&req->body, AG_MCP_MAX_MESSAGE);
            s_unreserve(h, req);
        }
        if (!req->too_big && !req->busy &&
            buf_append(&req->body, upload, *upload_size) < 0) {
            req->too_big = true;
            buf_release(&req->body);
            buf_init(&req->body, AG_MCP_MAX_MESSAGE);
            s_unreserve(h, req);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return s_post(h, c, req);
}

static void
s_completed(void *cls, struct MHD_Connection *c, void **con_cls,
            enum MHD_RequestTerminationCode why)
{
    (void)c;
    (void)why;
    s_req_t *req = *con_cls;
    if (!req)
        return;
    s_unreserve(cls, req);
    buf_release(&req->body);
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
    crypto_hash_sha256(h->token_hash, (const unsigned char *)h->token,
                       h->token_len);
    sodium_memzero(line, sizeof line);
    return 0;
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
    s_http_t h = {.cfg = cfg, .o = o, .lock = PTHREAD_MUTEX_INITIALIZER};
    bool loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    if (o->token_file && s_read_token(&h, o->token_file, err) < 0)
        return -1;
    if (!loopback && !h.token)
        return err_set(err, ERR_USAGE,
                       "--http %s: listening beyond loopback needs "
                       "--token-file (a bearer token clients must send)",
                       o->listen);
    h.sessions =
        ag_mcp_sessions_new(o->max_sessions, cfg->session->idle_timeout_ms,
                            cfg->session->max_lifetime_ms);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, s_handler, &h, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)CONN_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED, s_completed, &h,
        MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, NULL, MHD_OPTION_END);
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
    while (!(stop && *stop)) {
        sleep(1);
        ag_mcp_sessions_expire(h.sessions);
    }
    log_info("mcp: stopping: ending %d sessions",
             ag_mcp_sessions_count(h.sessions));
    ag_mcp_sessions_end_all(h.sessions);
    MHD_stop_daemon(d);
out:
    ag_mcp_sessions_destroy(&h.sessions);
    if (h.token)
        sodium_memzero(h.token, h.token_len);
    free(h.token);
    return rc;
}
