#include "agent/mcp/ag_mcp_http.h"

#include "agent/http/ag_httpd.h"
#include "agent/mcp/ag_mcp_rpc.h"
#include "agent/mcp/ag_mcp_server.h"
#include "agent/mcp/ag_mcp_sessions.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define ENDPOINT "/mcp"
#define NET_PREFIX "/sessions/" /* the operator's door: s_network */
/* Requests being handled at once, each waiting for its session or a
 * cell on a worker, and more waiting for a worker: 503 beyond. */
#define MAX_WORKERS 128
#define MAX_QUEUED 128
/* ... of them for one session (a cancellation is never refused): one
 * session's queue cannot take every worker. */
#define SESSION_MAX_INFLIGHT 8

/* Requests in progress for one MCP-Session-Id, in s_http.busy. */
typedef struct s_busy {
    struct s_busy *next;
    char sid[AG_MCP_SESSION_ID_LEN + 1];
    int n; /* the entry goes at 0 */
} s_busy_t;

typedef struct s_http {
    const ag_mcp_config_t *cfg;
    const ag_mcp_http_opts_t *o;
    ag_mcp_sessions_t *sessions;
    bool has_token;
    ag_mcp_token_t token;
    pthread_mutex_t lock; /* guards busy */
    s_busy_t *busy;
} s_http_t;

/* ---- responses -------------------------------------------------------- */

static void
s_reply(ag_httpd_req_t *req, unsigned status, const char *type,
        const char *body, const char *session_id)
{
    if (session_id)
        ag_httpd_add_header(req, "MCP-Session-Id", session_id);
    if (status == 405)
        ag_httpd_add_header(req, "Allow", "POST, DELETE");
    if (status == 401)
        ag_httpd_add_header(req, "WWW-Authenticate", "Bearer");
    ag_httpd_reply(req, status, type, body, body ? strlen(body) : 0);
}

static void
s_reply_json(ag_httpd_req_t *req, unsigned status, const json_t *msg,
             const char *session_id)
{
    char *text = ag_mcp_dump(msg);
    s_reply(req, status, "application/json", text, session_id);
    free(text);
}

/* An HTTP-level refusal with a JSON-RPC error body saying why. */
static void s_refuse(ag_httpd_req_t *req, unsigned status, int code,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
s_refuse(ag_httpd_req_t *req, unsigned status, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    log_info("mcp: HTTP %u: %s", status, text);
    json_t *e = ag_mcp_error(NULL, code, "%s", text);
    free(text);
    s_reply_json(req, status, e, NULL);
    json_decref(e);
}

/* The daemon's own refusals (413, 503), in JSON-RPC. */
static void
s_daemon_refuse(void *arg, ag_httpd_req_t *req, unsigned status,
                const char *text)
{
    (void)arg;
    json_t *e = ag_mcp_error(
        NULL, status == 413 ? AG_MCP_INVALID_REQUEST : AG_MCP_INTERNAL_ERROR,
        "%s", text);
    s_reply_json(req, status, e, NULL);
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

void
ag_mcp_token_set(ag_mcp_token_t *t, const char *token)
{
    crypto_hash_sha256(t->sha256, (const unsigned char *)token, strlen(token));
}

bool
ag_mcp_token_ok(const ag_mcp_token_t *t, const char *auth)
{
    /* Whatever arrives is hashed, and the two 32-byte digests compared in
     * constant time: the server keeps no length to compare first, and
     * neither the token's bytes nor its length shape the time. */
    bool bearer = auth && strncasecmp(auth, "Bearer ", 7) == 0;
    const char *got = bearer ? auth + 7 : "";
    unsigned char hash[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(hash, (const unsigned char *)got, strlen(got));
    int same = sodium_memcmp(hash, t->sha256, sizeof hash);
    sodium_memzero(hash, sizeof hash);
    return bearer && same == 0;
}

static bool
s_accepts(const ag_httpd_req_t *req, const char *type)
{
    const char *a = ag_httpd_header(req, "Accept");
    return a && (strstr(a, type) || strstr(a, "*/*"));
}

/* The headers are in (on the event loop): refuse what needs no body
 * before reading it. */
static void
s_check(void *arg, ag_httpd_req_t *req)
{
    s_http_t *h = arg;
    const char *method = ag_httpd_method(req);
    const char *origin = ag_httpd_header(req, "Origin");
    if (origin &&
        !ag_mcp_http_origin_ok(origin, h->o->origins, h->o->norigins)) {
        s_refuse(req, 403, AG_MCP_INVALID_REQUEST,
                 "Forbidden: Origin %.200s is not allowed "
                 "(--allow-origin)",
                 origin);
        return;
    }
    if (h->has_token &&
        !ag_mcp_token_ok(&h->token, ag_httpd_header(req, "Authorization"))) {
        s_refuse(req, 401, AG_MCP_INVALID_REQUEST,
                 "Unauthorized: send Authorization: Bearer TOKEN "
                 "(the token in the server's --token-file)");
        return;
    }
    if (strncmp(ag_httpd_path(req), NET_PREFIX, strlen(NET_PREFIX)) == 0) {
        if (strcmp(method, "PUT") != 0 && strcmp(method, "GET") != 0)
            s_refuse(req, 405, AG_MCP_INVALID_REQUEST,
                     "Method Not Allowed: GET or PUT a session's network");
        return; /* s_network */
    }
    if (strcmp(ag_httpd_path(req), ENDPOINT) != 0) {
        s_refuse(req, 404, AG_MCP_INVALID_REQUEST,
                 "Not Found: the MCP endpoint is " ENDPOINT);
        return;
    }
    if (strcmp(method, "GET") == 0) {
        s_refuse(req, 405, AG_MCP_INVALID_REQUEST,
                 "Method Not Allowed: this server opens no "
                 "server-initiated stream; POST requests");
        return;
    }
    if (strcmp(method, "DELETE") == 0)
        return;
    if (strcmp(method, "POST") != 0) {
        s_refuse(req, 405, AG_MCP_INVALID_REQUEST,
                 "Method Not Allowed: use POST or DELETE");
        return;
    }
    const char *len = ag_httpd_header(req, "Content-Length");
    if (len && strtoull(len, NULL, 10) > AG_MCP_MAX_MESSAGE) {
        s_refuse(req, 413, AG_MCP_INVALID_REQUEST,
                 "message of %.30s bytes refused: the limit is %zu "
                 "bytes (8 MiB)",
                 len, AG_MCP_MAX_MESSAGE);
        return;
    }
    const char *ctype = ag_httpd_header(req, "Content-Type");
    if (!ctype || strncasecmp(ctype, "application/json", 16) != 0) {
        s_refuse(req, 415, AG_MCP_INVALID_REQUEST,
                 "POST bodies must be Content-Type: application/json");
        return;
    }
    if (!s_accepts(req, "application/json") &&
        !s_accepts(req, "text/event-stream")) {
        s_refuse(req, 406, AG_MCP_INVALID_REQUEST,
                 "the client must accept application/json and "
                 "text/event-stream");
        return;
    }
}

/* ---- one session's share of the workers ------------------------------- */

/* Count a request for session `sid`: NULL (nothing counted) when it has
 * SESSION_MAX_INFLIGHT already; otherwise its slot, for s_busy_put. */
static s_busy_t *
s_busy_take(s_http_t *h, const char *sid, bool *full)
{
    *full = false;
    if (strlen(sid) != AG_MCP_SESSION_ID_LEN)
        return NULL; /* 404 soon: never a live session */
    pthread_mutex_lock(&h->lock);
    s_busy_t *slot = h->busy;
    while (slot && strcmp(slot->sid, sid) != 0)
        slot = slot->next;
    if (slot && slot->n >= SESSION_MAX_INFLIGHT) {
        *full = true;
        slot = NULL;
    } else {
        if (!slot) {
            slot = xcalloc(1, sizeof *slot);
            snprintf(slot->sid, sizeof slot->sid, "%s", sid);
            slot->next = h->busy;
            h->busy = slot;
        }
        slot->n++;
    }
    pthread_mutex_unlock(&h->lock);
    return slot;
}

static void
s_busy_put(s_http_t *h, s_busy_t *slot)
{
    if (!slot)
        return;
    pthread_mutex_lock(&h->lock);
    if (--slot->n == 0) {
        s_busy_t **pp = &h->busy;
        while (*pp != slot)
            pp = &(*pp)->next;
        *pp = slot->next;
        free(slot);
    }
    pthread_mutex_unlock(&h->lock);
}

/* ---- SSE: a tools/call that reports progress -------------------------- */

static void
s_sse_send(void *arg, const json_t *msg)
{
    char *line = ag_mcp_dump(msg);
    char *ev = xasprintf("event: message\ndata: %s\n\n", line);
    ag_httpd_stream_write(arg, ev, strlen(ev));
    free(ev);
    free(line);
}

/* Answer `msg` on session `s` (acquired; released here) as an SSE stream:
 * the stream is the answer at once, then the call runs and feeds it. */
static void
s_reply_stream(s_http_t *h, ag_httpd_req_t *req, ag_mcp_session_t *s,
               const json_t *msg)
{
    ag_httpd_add_header(req, "Cache-Control", "no-cache");
    ag_httpd_add_header(req, "MCP-Session-Id", ag_mcp_session_id(s));
    ag_httpd_stream_t *st =
        ag_httpd_stream(req, 200, "text/event-stream", ": keepalive\n\n");
    ag_mcp_io_t io = {.send = s_sse_send, .arg = st};
    json_t *resp = ag_mcp_session_handle(s, msg, &io);
    ag_mcp_sessions_release(h->sessions, s, true);
    if (resp) /* NULL: cancelled, the stream ends without a response */
        s_sse_send(st, resp);
    json_decref(resp);
    ag_httpd_stream_close(&st);
}

/* ---- requests (on a worker) ------------------------------------------- */

static bool
s_is_method(const json_t *msg, const char *method)
{
    const char *m = json_string_value(json_object_get(msg, "method"));
    return m && strcmp(m, method) == 0;
}

static void
s_initialize(s_http_t *h, ag_httpd_req_t *req, const json_t *msg)
{
    ag_mcp_server_t *server = ag_mcp_server_new(h->cfg);
    json_t *resp = ag_mcp_server_handle(server, msg, NULL);
    if (!ag_mcp_server_version(server)) { /* refused: no session */
        ag_mcp_server_destroy(&server);
        s_reply_json(req, 200, resp, NULL);
        json_decref(resp);
        return;
    }
    ag_mcp_session_t *s = ag_mcp_sessions_add(h->sessions, &server);
    if (!s) {
        json_decref(resp);
        {
            s_refuse(req, 503, AG_MCP_INTERNAL_ERROR,
                     "too many sessions: this server allows %d at once "
                     "(--max-sessions); end one with DELETE or try later",
                     h->o->max_sessions);
            return;
        }
    }
    log_info("mcp: new session %.8s… (%d live)", ag_mcp_session_id(s),
             ag_mcp_sessions_count(h->sessions));
    s_reply_json(req, 200, resp, ag_mcp_session_id(s));
    json_decref(resp);
    ag_mcp_sessions_release(h->sessions, s, true);
}

static void
s_delete(s_http_t *h, ag_httpd_req_t *req)
{
    const char *sid = ag_httpd_header(req, "MCP-Session-Id");
    if (!sid) {
        s_refuse(req, 400, AG_MCP_INVALID_REQUEST,
                 "Bad Request: DELETE needs MCP-Session-Id");
        return;
    }
    if (ag_mcp_sessions_end(h->sessions, sid) < 0) {
        s_refuse(req, 404, AG_MCP_INVALID_REQUEST,
                 "Not Found: no live session has this MCP-Session-Id");
        return;
    }
    log_info("mcp: session %.8s… ended by the client", sid);
    s_reply(req, 200, NULL, NULL, NULL);
}

/* A message for session `sid` (the request is answered here). */
static void
s_on_session(s_http_t *h, ag_httpd_req_t *req, const json_t *msg,
             const char *sid)
{
    /* A cancellation must not wait for the request it cancels. */
    const json_t *rid =
        json_object_get(json_object_get(msg, "params"), "requestId");
    bool cancel = s_is_method(msg, "notifications/cancelled") &&
                  !json_object_get(msg, "id") && rid;
    ag_mcp_session_t *s = ag_mcp_sessions_acquire(h->sessions, sid, !cancel);
    if (!s) {
        s_refuse(req, 404, AG_MCP_INVALID_REQUEST,
                 "Not Found: no live session has this MCP-Session-Id "
                 "(it ended or never existed); initialize a new one");
        return;
    }
    /* A supported MCP-Protocol-Version other than the negotiated one is
     * accepted, as the reference SDK server does (the conformance suite
     * sends 2025-03-26 on a 2025-11-25 session). */
    if (cancel) {
        ag_mcp_server_cancel(ag_mcp_session_server(s), rid);
        ag_mcp_sessions_release(h->sessions, s, false);
        {
            s_reply(req, 202, NULL, NULL, NULL);
            return;
        }
    }
    json_t *token = json_object_get(
        json_object_get(json_object_get(msg, "params"), "_meta"),
        "progressToken");
    if (s_is_method(msg, "tools/call") && token &&
        s_accepts(req, "text/event-stream")) {
        s_reply_stream(h, req, s, msg);
        return;
    }
    json_t *resp = ag_mcp_session_handle(s, msg, NULL);
    ag_mcp_sessions_release(h->sessions, s, true);
    if (resp)
        s_reply_json(req, 200, resp, NULL);
    else
        s_reply(req, 202, NULL, NULL, NULL);
    json_decref(resp);
}

/* The operator's door, not MCP: GET or PUT /sessions/ID/network with
 * {"allow_net": "RULE,RULE"} (or a list; "" or [] for none) replaces the
 * session's --allow-net rules for its next connections. Behind the same
 * token as /mcp; the box cannot reach this server (its own network
 * namespace), nor name a session (ids are random and never enter it). */
static void
s_network(s_http_t *h, ag_httpd_req_t *req)
{
    const char *p = ag_httpd_path(req) + strlen(NET_PREFIX);
    char sid[AG_MCP_SESSION_ID_LEN + 1];
    size_t n = strcspn(p, "/");
    if (n != AG_MCP_SESSION_ID_LEN || strcmp(p + n, "/network") != 0) {
        s_refuse(req, 404, AG_MCP_INVALID_REQUEST,
                 "Not Found: the path is " NET_PREFIX "SESSION-ID/network");
        return;
    }
    memcpy(sid, p, n);
    sid[n] = '\0';
    ag_mcp_session_t *s = ag_mcp_sessions_acquire(h->sessions, sid, false);
    if (!s) {
        s_refuse(req, 404, AG_MCP_INVALID_REQUEST,
                 "Not Found: no live session has this id");
        return;
    }
    ag_mcp_box_t *box = ag_mcp_server_box(ag_mcp_session_server(s));
    err_t err = {0};
    int rc = 0;
    if (strcmp(ag_httpd_method(req), "PUT") == 0) {
        size_t len;
        const char *body = ag_httpd_body(req, &len);
        json_t *j = body ? json_loadb(body, len, 0, NULL) : NULL;
        char *rules =
            j ? ag_net_rules_join(json_object_get(j, "allow_net")) : NULL;
        if (!rules)
            rc = err_set(&err, ERR_USAGE,
                         "the body must be {\"allow_net\": \"RULE,RULE\"} "
                         "or {\"allow_net\": [RULE, ...]}");
        else if ((rc = ag_mcp_box_set_net_rules(box, rules, &err)) == 0)
            log_info("mcp: session %.8s… rules set by the operator: %s", sid,
                     rules);
        free(rules);
        json_decref(j);
    }
    char *now = rc == 0 ? ag_mcp_box_net_rules(box) : NULL;
    ag_mcp_sessions_release(h->sessions, s, false);
    if (rc < 0) {
        s_refuse(req, err.code == ERR_USAGE ? 400 : 500, AG_MCP_INVALID_REQUEST,
                 "%s", err.text);
        return;
    }
    if (!now) {
        s_refuse(req, 409, AG_MCP_INVALID_REQUEST,
                 "this server was started without --allow-net: its "
                 "sessions have no network");
        return;
    }
    json_t *r = json_pack("{s:s}", "allow_net", now);
    s_reply_json(req, 200, r, NULL);
    json_decref(r);
    free(now);
}

static void
s_handle(void *arg, ag_httpd_req_t *req)
{
    s_http_t *h = arg;
    if (strncmp(ag_httpd_path(req), NET_PREFIX, strlen(NET_PREFIX)) == 0) {
        s_network(h, req);
        return;
    }
    if (strcmp(ag_httpd_method(req), "DELETE") == 0) {
        s_delete(h, req);
        return;
    }
    size_t len;
    const char *body = ag_httpd_body(req, &len);
    json_t *perr = NULL;
    json_t *msg = ag_mcp_parse(body, len, &perr);
    if (!msg) {
        s_reply_json(req, 400, perr, NULL);
        json_decref(perr);
        return;
    }
    const char *sid = ag_httpd_header(req, "MCP-Session-Id");
    const char *pv = ag_httpd_header(req, "MCP-Protocol-Version");
    if (s_is_method(msg, "initialize") && !sid) {
        s_initialize(h, req, msg);
    } else if (!sid) {
        s_refuse(req, 400, AG_MCP_INVALID_REQUEST,
                 "Bad Request: no MCP-Session-Id header; send "
                 "initialize first and then the id it returned");
    } else if (pv && !ag_mcp_version_supported(pv)) {
        s_refuse(req, 400, AG_MCP_INVALID_REQUEST,
                 "Bad Request: unsupported MCP-Protocol-Version %.100s; "
                 "this server speaks %s, %s and %s",
                 pv, ag_mcp_versions[0], ag_mcp_versions[1],
                 ag_mcp_versions[2]);
    } else if (s_is_method(msg, "notifications/cancelled")) {
        s_on_session(h, req, msg, sid); /* never refused for the count */
    } else {
        bool full;
        s_busy_t *slot = s_busy_take(h, sid, &full);
        if (full)
            s_refuse(req, 503, AG_MCP_INTERNAL_ERROR,
                     "Service Unavailable: this session already has %d "
                     "requests in progress, the most one session may; wait "
                     "for their answers",
                     SESSION_MAX_INFLIGHT);
        else
            s_on_session(h, req, msg, sid);
        s_busy_put(h, slot);
    }
    json_decref(msg);
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
        return err_errno(err, ERR_USAGE, "--token-file %s", path);
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
    ag_mcp_token_set(&h->token, line);
    h->has_token = true;
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
    if (!loopback && !h.has_token)
        return err_set(err, ERR_USAGE,
                       "--http %s: listening beyond loopback needs "
                       "--token-file (a bearer token clients must send)",
                       o->listen);
    h.sessions =
        ag_mcp_sessions_new(o->max_sessions, cfg->session->idle_timeout_ms,
                            cfg->session->max_lifetime_ms);
    ag_httpd_opts_t ho = {
        .addr = (const struct sockaddr *)&sa,
        .addrlen = sizeof sa,
        .check = s_check,
        .handle = s_handle,
        .refuse = s_daemon_refuse,
        .arg = &h,
        .name = "mcp",
    };
    ag_httpd_limits_default(&ho.limits);
    ho.limits.max_body = AG_MCP_MAX_MESSAGE;
    /* Two messages at the cap: each body is parsed within
     * common/jsonlim's bound (its length plus 4 MiB), so bodies and their
     * trees together stay under ~40 MiB however many clients send. */
    ho.limits.body_in_flight = 2 * AG_MCP_MAX_MESSAGE;
    ho.limits.workers = MAX_WORKERS;
    ho.limits.queue_max = MAX_QUEUED;
    int rc = 0;
    ag_httpd_t *d = ag_httpd_start(&ho, err);
    if (!d) {
        rc = err_prefix(err, "--http %s: ", o->listen);
        goto out;
    }
    char addr[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
    fprintf(stderr,
            "jupyter-agent mcp: listening on http://%s:%u" ENDPOINT "\n", addr,
            ag_httpd_port(d));
    fflush(stderr);
    while (!(stop && *stop)) {
        sleep(1);
        ag_mcp_sessions_expire(h.sessions);
    }
    log_info("mcp: stopping: ending %d sessions",
             ag_mcp_sessions_count(h.sessions));
    /* New requests are refused first, so no session starts after these
     * end; the running ones return once their session has ended. */
    ag_httpd_shutdown(d);
    ag_mcp_sessions_end_all(h.sessions);
    ag_httpd_stop(&d);
out:
    ag_mcp_sessions_destroy(&h.sessions);
    sodium_memzero(&h.token, sizeof h.token);
    return rc;
}
