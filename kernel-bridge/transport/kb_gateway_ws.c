/* kb_gateway_ws: a kernel's WebSocket on a Jupyter Server as a
 * kb_transport (see kb_gateway.h). One libwebsockets context per
 * connection, serviced only from poll(), so nothing runs behind the
 * caller's back. Frames are queued per channel as they arrive (bounded),
 * and decoded with the receiver's limits when taken. */
#include "kb_gateway.h"
#include "kb_gateway_impl.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/escape.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <libwebsockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What may wait in the queues before new frames are dropped (counted), as
 * a ZeroMQ socket drops past its high-water mark. */
#define QUEUE_MAX_BYTES ((size_t)64 << 20)
#define QUEUE_MAX_MSGS 100000
#define RETRY_FIRST_MS 250
#define RETRY_MAX_MS 2000
/* How long one handshake may wait for its answer before it is dropped and
 * tried again. Jupyter Server holds the handshake until the kernel answers
 * kernel_info (up to its kernel_info_timeout, 60 s); a kernel that missed
 * the first nudges usually answers on a fresh connection at once. */
#define HANDSHAKE_TRY_MS 30000
/* Connections in a row that close before anything arrives on them. */
#define MAX_FLAPS 5
/* How often a wait asks the REST API whether the kernel still exists. */
#define CHECK_MS 3000
#define SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"

typedef struct s_item {
    struct s_item *next;
    uint8_t *raw; /* owned frame, decoded when taken */
    size_t len;   /* bytes of raw */
    bool binary;  /* a binary frame (else text) */
} s_item_t;

typedef struct s_out {
    struct s_out *next;
    uint8_t *data; /* owned; LWS_PRE bytes of headroom, then the frame */
    size_t len;    /* bytes of the frame */
    bool binary;
} s_out_t;

enum s_state { S_CONNECTING, S_OPEN, S_CLOSED };

typedef struct s_ws {
    kb_transport_t base;     /* first: a kb_transport_t * is an s_ws_t * */
    kb_gateway_t *g;         /* borrowed */
    char id[65];             /* the kernel's id */
    char session[37];        /* session_id of the socket and our messages */
    char *path;              /* owned request path with the query */
    struct lws_context *ctx; /* owned */
    struct lws *wsi;         /* the connection while it exists */
    enum s_state state;      /* of the connection */
    int http_status;         /* of a refused handshake, else 0 */
    char conn_error[256];    /* why the last connection failed or closed */
    kb_ws_proto_t proto;     /* the framing the server chose */
    size_t max_msg;          /* cap on one frame */
    buf_t rx;                /* fragments of the frame being received */
    bool rx_skip;            /* the frame passed max_msg: drop the rest */
    s_item_t *head[KB_NCHANNELS], *tail[KB_NCHANNELS]; /* owned queues */
    size_t queued_bytes, queued_msgs;
    s_out_t *out_head, *out_tail; /* owned frames to send */
    uint64_t dropped;             /* frames refused on arrival, all time */
    kb_wire_stats_t unfolded;     /* of those, not yet in a caller's stats */
    bool gone;                    /* the kernel is lost for good */
    char gone_why[1024];          /* and why */
    int64_t lost_since; /* CLOCK_MONOTONIC ms the socket closed; 0 open */
    int64_t next_retry; /* when to try to reconnect */
    int retry_ms;       /* the current back-off */
    int flaps;          /* connections in a row that delivered nothing */
    int64_t checked_ms; /* when the REST API last confirmed the kernel */
    lws_sorted_usec_list_t sul; /* wakes lws_service at poll's deadline */
} s_ws_t;

static void s_set_gone(s_ws_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
s_set_gone(s_ws_t *t, const char *fmt, ...)
{
    if (t->gone)
        return;
    t->gone = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->gone_why, sizeof t->gone_why, fmt, ap);
    va_end(ap);
}

/* A status the server sends on its own (no parent): the kernel died and is
 * being restarted, or could not be. */
static void
s_watch_status(s_ws_t *t, const kb_msg_t *m)
{
    if (strcmp(kb_msg_type(m), "status") != 0 || *kb_msg_parent_id(m))
        return;
    const char *state = json_string_value(
        json_object_get(kb_msg_content(m), "execution_state"));
    if (state && strcmp(state, "restarting") == 0)
        s_set_gone(t,
                   "the kernel died on the Jupyter server at %s, which "
                   "restarts it (its state is lost)",
                   t->g->shown);
    else if (state && strcmp(state, "dead") == 0)
        s_set_gone(t,
                   "the kernel died on the Jupyter server at %s, which could "
                   "not restart it",
                   t->g->shown);
}

/* A frame refused on arrival, counted in `counter` (a field of
 * t->unfolded), or NULL when the decoder counted it there already. */
static void
s_drop(s_ws_t *t, uint64_t *counter, const char *why)
{
    t->dropped++;
    if (counter)
        (*counter)++;
    log_debug("gateway: dropped a frame: %s", why);
}

/* A whole frame arrived: queue it on its channel. */
static void
s_on_frame(s_ws_t *t, const uint8_t *data, size_t len, bool binary)
{
    if (t->queued_msgs >= QUEUE_MAX_MSGS ||
        (t->queued_bytes && t->queued_bytes + len > QUEUE_MAX_BYTES)) {
        s_drop(t, &t->unfolded.overflow, "the queues are full");
        return;
    }
    err_t err;
    kb_channel_t ch;
    s_item_t *it = xcalloc(1, sizeof *it);
    /* Kept as bytes and decoded when taken, with the taker's limits: a
     * message for another parent is then dropped before its JSON is
     * parsed, and what is parsed passes the parse-cost bound. */
    if (kb_ws_channel(data, len, binary, t->proto, &t->unfolded, &ch, &err)) {
        free(it);
        s_drop(t, NULL, err.text);
        return;
    }
    it->raw = xmalloc(len ? len : 1);
    memcpy(it->raw, data, len);
    it->len = len;
    it->binary = binary;
    /* Only the server's own status messages need a look now. */
    if (ch == KB_IOPUB && memmem(data, len, "\"status\"", 8) &&
        (memmem(data, len, "restarting", 10) ||
         memmem(data, len, "\"dead\"", 6))) {
        kb_msg_t *m =
            kb_ws_decode(data, len, binary, t->proto, NULL, NULL, &ch, &err);
        if (m)
            s_watch_status(t, m);
        kb_msg_destroy(&m);
    }
    if (t->tail[ch])
        t->tail[ch]->next = it;
    else
        t->head[ch] = it;
    t->tail[ch] = it;
    t->flaps = 0; /* this connection works */
    t->retry_ms = 0;
    t->queued_bytes += it->len;
    t->queued_msgs++;
}

/* Take part of a frame. A frame (or a fragmented message) is refused as
 * soon as its announced length passes max_msg: what is left of it is read
 * and discarded as it arrives, never stored (so memory stays bounded by
 * what we accept, not by what is announced), and the socket stays open:
 * the messages after it (the reply, the idle) still matter, and closing
 * would only bring a reconnect. */
static void
s_on_rx(s_ws_t *t, struct lws *wsi, const void *in, size_t len)
{
    size_t left = lws_remaining_packet_payload(wsi);
    if (!t->rx_skip && (len > t->max_msg || left > t->max_msg - len ||
                        t->rx.len > t->max_msg - len - left)) {
        char why[96];
        snprintf(why, sizeof why, "a frame of more than %zu bytes", t->max_msg);
        s_drop(t, &t->unfolded.oversized, why);
        t->rx_skip = true;
        buf_release(&t->rx); /* frees what earlier fragments took */
        buf_init(&t->rx, t->max_msg);
    }
    if (!t->rx_skip && buf_append(&t->rx, in, len)) {
        s_drop(t, &t->unfolded.oversized, "a frame past the cap");
        t->rx_skip = true; /* not reached: the check above comes first */
        buf_reset(&t->rx);
    }
    if (!lws_is_final_fragment(wsi) || left)
        return;
    if (!t->rx_skip)
        s_on_frame(t, (const uint8_t *)t->rx.data, t->rx.len,
                   lws_frame_is_binary(wsi));
    t->rx_skip = false;
    buf_reset(&t->rx);
}

/* Acknowledge what arrived at once. jupyter_server leaves Nagle's
 * algorithm on for kernel WebSockets, so after a small message (status
 * busy) it holds the next one (the reply) until we ACK; Linux delays that
 * ACK up to 40 ms. TCP_QUICKACK turns the delay off only until the kernel
 * falls back into its interactive mode, so it is set again after every
 * receive. */
static void
s_quickack(struct lws *wsi)
{
    int one = 1, fd = (int)lws_get_socket_fd(wsi);
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

static int
s_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
           void *in, size_t len)
{
    (void)user;
    s_ws_t *t = lws_context_user(lws_get_context(wsi));
    if (!t)
        return 0;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
        unsigned char **p = in, *end = *p + len;
        if (t->g->auth && lws_add_http_header_by_name(
                              wsi, (const unsigned char *)"authorization:",
                              (const unsigned char *)t->g->auth,
                              (int)strlen(t->g->auth), p, end))
            return -1;
        break;
    }
    case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH: {
        /* The subprotocol the server picked (the headers are gone once
         * the socket is established); none means legacy framing. */
        char proto[64] = "";
        if (lws_hdr_copy(wsi, proto, sizeof proto, WSI_TOKEN_PROTOCOL) < 0)
            proto[0] = '\0';
        t->proto =
            strcmp(proto, KB_WS_V1_PROTOCOL) == 0 ? KB_WS_V1 : KB_WS_LEGACY;
        break;
    }
    case LWS_CALLBACK_CLIENT_ESTABLISHED: {
        /* Requests are small and answered at once: without TCP_NODELAY,
         * Nagle's algorithm and delayed ACKs add ~40 ms to each. */
        int one = 1, fd = (int)lws_get_socket_fd(wsi);
        if (fd >= 0)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        s_quickack(wsi);
        t->rx_skip = false; /* a frame cut by the last close is gone */
        buf_reset(&t->rx);
        log_info("gateway: kernel %s: %s WebSocket framing", t->id,
                 t->proto == KB_WS_V1 ? "v1 binary" : "legacy JSON");
        t->state = S_OPEN;
        t->lost_since = 0;
        t->flaps++;
        if (t->out_head)
            lws_callback_on_writable(wsi);
        break;
    }
    case LWS_CALLBACK_CLIENT_RECEIVE:
        s_on_rx(t, wsi, in, len);
        s_quickack(wsi);
        break;
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
        s_out_t *o = t->out_head;
        if (!o)
            break;
        int n = lws_write(wsi, o->data + LWS_PRE, o->len,
                          o->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);
        if (n < (int)o->len)
            return -1; /* closes the connection; we reconnect */
        t->out_head = o->next;
        if (!t->out_head)
            t->out_tail = NULL;
        free(o->data);
        free(o);
        if (t->out_head)
            lws_callback_on_writable(wsi);
        break;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        t->http_status = (int)lws_http_client_http_response(wsi);
        snprintf(t->conn_error, sizeof t->conn_error, "%.*s", in ? (int)len : 0,
                 in ? (const char *)in : "");
        if (!in || !*t->conn_error)
            snprintf(t->conn_error, sizeof t->conn_error, "connection failed");
        t->state = S_CLOSED;
        t->wsi = NULL;
        break;
    case LWS_CALLBACK_CLIENT_CLOSED:
        snprintf(t->conn_error, sizeof t->conn_error,
                 "the server closed the socket");
        t->state = S_CLOSED;
        t->wsi = NULL;
        break;
    case LWS_CALLBACK_WSI_DESTROY:
        if (t->wsi == wsi) {
            /* Destroyed without an error or close callback: libwebsockets
             * gave up on the handshake (a timeout, or the server hung up
             * before answering). */
            if (t->state == S_CONNECTING && !*t->conn_error)
                snprintf(t->conn_error, sizeof t->conn_error,
                         "the server hung up before the handshake finished");
            t->state = S_CLOSED;
            t->wsi = NULL;
        }
        break;
    default:
        break;
    }
    return 0;
}

static const struct lws_protocols s_protocols[] = {
    /* Named as the subprotocol we offer, so libwebsockets binds the socket
     * to it whichever framing the server picks. rx_buffer_size: lws hands
     * large frames over in pieces of this size. */
    {KB_WS_V1_PROTOCOL, s_callback, 0, 256 << 10, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0}};

static void
s_wake(lws_sorted_usec_list_t *sul)
{
    (void)sul; /* only makes lws_service return */
}

/* Start a connection (returns at once; the state tells the outcome). */
static void
s_open(s_ws_t *t)
{
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = t->ctx;
    ci.address = t->g->parts.host;
    ci.port = t->g->parts.port;
    /* A 3xx answer is a refusal, not a new place to send the token to
     * (libwebsockets follows redirects, with our handshake headers,
     * unless told not to). */
    ci.ssl_connection =
        (t->g->parts.tls ? LCCSCF_USE_SSL : 0) | LCCSCF_HTTP_NO_FOLLOW_REDIRECT;
    ci.path = t->path;
    ci.host = t->g->parts.host;
    ci.origin = t->g->parts.host;
    ci.protocol = KB_WS_V1_PROTOCOL;
    ci.local_protocol_name = KB_WS_V1_PROTOCOL;
    ci.ietf_version_or_minus_one = -1;
    ci.pwsi = &t->wsi;
    t->state = S_CONNECTING;
    t->http_status = 0;
    t->conn_error[0] = '\0';
    if (!lws_client_connect_via_info(&ci) && t->state == S_CONNECTING) {
        t->state = S_CLOSED;
        t->wsi = NULL;
        if (!*t->conn_error)
            snprintf(t->conn_error, sizeof t->conn_error,
                     "cannot start a connection");
    }
}

/* One round of libwebsockets' event loop, returning by `ms` at the latest
 * (it sleeps until its next event, so a timer bounds the wait). */
static void
s_service(s_ws_t *t, int ms)
{
    lws_sul_schedule(t->ctx, 0, &t->sul, s_wake,
                     (lws_usec_t)(ms > 0 ? ms : 0) * LWS_US_PER_MS);
    if (lws_service(t->ctx, 0) < 0)
        s_set_gone(t, "the connection to the Jupyter server at %s failed",
                   t->g->shown);
}

/* Whether a failed handshake is the server's final word: a redirect
 * (never followed: the token would go along to wherever it points) or a
 * 4xx (the token, the kernel, the request itself), except 408 and 429,
 * which ask for another try. Anything else (a 5xx, a busy server that
 * hung up or timed out) is worth another try. */
static bool
s_refused(const s_ws_t *t)
{
    int st = t->http_status;
    return st >= 300 && st < 500 && st != 408 && st != 429;
}

/* The socket is down: find out whether the kernel still exists and, when
 * it does, reconnect with the same session (the server replays what it
 * buffered meanwhile). -1 once the kernel is lost. */
static int
s_maintain(s_ws_t *t)
{
    if (t->gone)
        return -1;
    if (t->state != S_CLOSED)
        return 0;
    int64_t now = clock_mono_ms();
    if (!t->lost_since) {
        t->lost_since = now;
        t->next_retry = now;
        log_info("gateway: the socket of kernel %s closed (%s); reconnecting",
                 t->id, t->conn_error);
    }
    if (s_refused(t)) { /* the last try was answered, and not by a yes */
        s_set_gone(t,
                   "the Jupyter server at %s refused to reconnect the "
                   "WebSocket of kernel %s (HTTP %d%s)",
                   t->g->shown, t->id, t->http_status,
                   t->http_status < 400 ? ": a redirect, not followed" : "");
        return -1;
    }
    if (now < t->next_retry)
        return 0;
    if (t->flaps > MAX_FLAPS) {
        s_set_gone(t,
                   "the Jupyter server at %s keeps closing the WebSocket of "
                   "kernel %s (%d times in a row: %s)",
                   t->g->shown, t->id, t->flaps, t->conn_error);
        return -1;
    }
    char state[64];
    err_t err;
    if (kb_gateway_kernel_state(t->g, t->id, state, &err)) {
        if (strstr(err.text, "is gone from")) {
            s_set_gone(t, "%s", err.text);
            return -1;
        }
        if (now - t->lost_since > t->g->reconnect_ms) {
            s_set_gone(t,
                       "lost the connection to kernel %s and could not "
                       "reconnect within %d s: %.600s",
                       t->id, t->g->reconnect_ms / 1000, err.text);
            return -1;
        }
    } else if (strcmp(state, "dead") == 0) {
        s_set_gone(t, "the Jupyter server at %s reports the kernel dead",
                   t->g->shown);
        return -1;
    } else {
        s_open(t);
    }
    t->retry_ms = t->retry_ms ? t->retry_ms * 2 : RETRY_FIRST_MS;
    if (t->retry_ms > RETRY_MAX_MS)
        t->retry_ms = RETRY_MAX_MS;
    t->next_retry = now + t->retry_ms;
    return 0;
}

static unsigned
s_ready_bits(s_ws_t *t, unsigned mask)
{
    unsigned ready = 0;
    for (int ch = 0; ch < KB_NCHANNELS; ch++)
        if ((mask & (1u << ch)) && t->head[ch])
            ready |= 1u << ch;
    return ready;
}

static unsigned
s_poll(kb_transport_t *tp, unsigned mask, int watch_fd, int ms)
{
    (void)watch_fd; /* a remote kernel has no process of ours */
    s_ws_t *t = (s_ws_t *)tp;
    int64_t deadline = clock_mono_ms() + (ms > 0 ? ms : 0);
    for (;;) {
        /* Frames that arrived are delivered before a loss is reported. */
        unsigned ready = s_ready_bits(t, mask);
        if (ready)
            return ready;
        if (s_maintain(t))
            return KB_TRANSPORT_GONE;
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            return 0;
        if (t->state == S_CLOSED && t->next_retry < deadline)
            left = t->next_retry - clock_mono_ms();
        s_service(t, left > 0 ? (int)left : 0);
    }
}

static int
s_send(kb_transport_t *tp, kb_channel_t ch, const kb_msg_t *msg, err_t *err)
{
    s_ws_t *t = (s_ws_t *)tp;
    if (t->gone)
        return err_set(err, ERR_KERNEL, "%s", t->gone_why);
    buf_t b;
    buf_init(&b, 0);
    buf_append(&b, (char[LWS_PRE]){0}, LWS_PRE);
    bool binary = false;
    if (kb_ws_encode(msg, ch, t->proto, &b, &binary, err)) {
        buf_release(&b);
        return -1;
    }
    s_out_t *o = xcalloc(1, sizeof *o);
    size_t total;
    o->data = (uint8_t *)buf_detach(&b, &total);
    o->len = total - LWS_PRE;
    o->binary = binary;
    if (t->out_tail)
        t->out_tail->next = o;
    else
        t->out_head = o;
    t->out_tail = o;
    if (t->wsi && t->state == S_OPEN)
        lws_callback_on_writable(t->wsi);
    return 0;
}

static void
s_collect(kb_transport_t *tp, kb_wire_stats_t *stats)
{
    s_ws_t *t = (s_ws_t *)tp;
    kb_wire_stats_add(stats, &t->unfolded);
    memset(&t->unfolded, 0, sizeof t->unfolded);
}

static kb_msg_t *
s_recv(kb_transport_t *tp, kb_channel_t ch, const kb_frames_limits_t *lim,
       kb_wire_stats_t *stats, err_t *err)
{
    s_ws_t *t = (s_ws_t *)tp;
    err_clear(err);
    if (stats)
        s_collect(tp, stats);
    s_item_t *it = t->head[ch];
    if (!it)
        return NULL;
    t->head[ch] = it->next;
    if (!t->head[ch])
        t->tail[ch] = NULL;
    t->queued_bytes -= it->len;
    t->queued_msgs--;
    kb_channel_t got = ch;
    kb_wire_stats_t seen = {0};
    kb_msg_t *m = kb_ws_decode(it->raw, it->len, it->binary, t->proto, lim,
                               &seen, &got, err);
    /* The raw look (kb_ws_decode) only saw the id somewhere in the frame. */
    if (m && lim &&
        ((lim->status_only && strcmp(kb_msg_type(m), "status")) ||
         (lim->parent_id && strcmp(kb_msg_parent_id(m), lim->parent_id)))) {
        kb_msg_destroy(&m);
        seen.accepted = 0;
        seen.foreign++;
        err_set(err, ERR_KERNEL, "dropped a message meant for someone else");
    }
    if (stats)
        kb_wire_stats_add(stats, &seen);
    free(it->raw);
    free(it);
    return m;
}

static int
s_tick(kb_transport_t *tp, bool heartbeat, err_t *err)
{
    (void)heartbeat; /* the socket's state and the REST API tell */
    s_ws_t *t = (s_ws_t *)tp;
    /* A kernel deleted on the server can leave its socket open and
     * silent: ask the REST API now and then while someone waits. */
    int64_t now = clock_mono_ms();
    if (!t->gone && t->state == S_OPEN && now - t->checked_ms > CHECK_MS) {
        char state[64];
        err_t e;
        t->checked_ms = now;
        if (kb_gateway_kernel_state(t->g, t->id, state, &e) == 0) {
            if (strcmp(state, "dead") == 0)
                s_set_gone(t,
                           "the Jupyter server at %s reports the kernel dead",
                           t->g->shown);
        } else if (strstr(e.text, "is gone from")) {
            s_set_gone(t, "%s", e.text);
        }
    }
    /* What arrived before the loss is delivered first (poll reports the
     * loss once the queues are empty). */
    if (s_ready_bits(t, ~0u))
        return 0;
    if (s_maintain(t))
        return err_set(err, ERR_KERNEL, "%s", t->gone_why);
    return 0;
}

static bool
s_ready(kb_transport_t *tp)
{
    return ((s_ws_t *)tp)->state == S_OPEN;
}

static int
s_ping(kb_transport_t *tp, int ms)
{
    (void)ms;
    s_ws_t *t = (s_ws_t *)tp;
    char state[64];
    if (t->gone || kb_gateway_kernel_state(t->g, t->id, state, NULL))
        return -1;
    return strcmp(state, "dead") == 0 ? -1 : 0;
}

static void
s_destroy(kb_transport_t *tp)
{
    s_ws_t *t = (s_ws_t *)tp;
    if (t->ctx)
        lws_context_destroy(t->ctx);
    for (int ch = 0; ch < KB_NCHANNELS; ch++)
        while (t->head[ch]) {
            s_item_t *it = t->head[ch];
            t->head[ch] = it->next;
            free(it->raw);
            free(it);
        }
    while (t->out_head) {
        s_out_t *o = t->out_head;
        t->out_head = o->next;
        free(o->data);
        free(o);
    }
    buf_release(&t->rx);
    free(t->path);
    free(t);
}

static const kb_transport_ops_t s_ops = {
    .send = s_send,
    .recv = s_recv,
    .poll = s_poll,
    .tick = s_tick,
    .ready = s_ready,
    .collect = s_collect,
    .ping = s_ping,
    .destroy = s_destroy,
};

/* After a failed handshake: whether the REST API still answers and
 * reports the kernel alive, so another try can help. If not, conn_error
 * says why. */
static bool
s_kernel_lives(s_ws_t *t)
{
    char state[64];
    err_t err;
    if (kb_gateway_kernel_state(t->g, t->id, state, &err)) {
        snprintf(t->conn_error, sizeof t->conn_error, "%.255s", err.text);
        return false;
    }
    if (strcmp(state, "dead") == 0) {
        snprintf(t->conn_error, sizeof t->conn_error,
                 "the server reports the kernel dead");
        return false;
    }
    return true;
}

/* Open the first connection, trying again with back-off while the server
 * drops handshakes but still reports the kernel alive, until it opens, is
 * refused, or `deadline` passes. */
static void
s_open_until(s_ws_t *t, int64_t deadline)
{
    int retry_ms = RETRY_FIRST_MS;
    for (int attempt = 1;; attempt++) {
        s_open(t);
        int64_t give_up = clock_mono_ms() + HANDSHAKE_TRY_MS;
        if (give_up > deadline)
            give_up = deadline;
        while (t->state == S_CONNECTING && clock_mono_ms() < give_up)
            s_service(t, (int)(give_up - clock_mono_ms()));
        if (t->state == S_CONNECTING && t->wsi && give_up < deadline) {
            /* Closes it now; the destroy callback marks it closed. */
            lws_set_timeout(t->wsi, PENDING_TIMEOUT_AWAITING_SERVER_RESPONSE,
                            LWS_TO_KILL_SYNC);
            t->state = S_CLOSED;
            t->wsi = NULL;
            snprintf(t->conn_error, sizeof t->conn_error,
                     "no answer to the handshake in %d s",
                     HANDSHAKE_TRY_MS / 1000);
        }
        if (t->state != S_CLOSED || s_refused(t))
            return;
        int64_t left = deadline - clock_mono_ms();
        if (left <= retry_ms || !s_kernel_lives(t))
            return;
        log_info("gateway: the WebSocket of kernel %s did not open (%s, "
                 "attempt %d); trying again",
                 t->id, t->conn_error, attempt);
        for (int64_t until = clock_mono_ms() + retry_ms;
             clock_mono_ms() < until;)
            s_service(t, (int)(until - clock_mono_ms()));
        retry_ms = retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : retry_ms * 2;
    }
}

/* libwebsockets' own log lines go to ours, at debug level. */
static void
s_lws_log(int level, const char *line)
{
    (void)level;
    log_debug("libwebsockets: %s", line);
}

kb_transport_t *
kb_gateway_connect(kb_gateway_t *g, const char *id, const char *session,
                   int64_t max_msg, int timeout_ms, err_t *err)
{
    lws_set_log_level(LLL_ERR | LLL_WARN, s_lws_log);
    s_ws_t *t = xcalloc(1, sizeof *t);
    t->base.ops = &s_ops;
    t->g = g;
    snprintf(t->id, sizeof t->id, "%s", id);
    snprintf(t->session, sizeof t->session, "%s", session);
    t->path = xasprintf("%s/api/kernels/%s/channels?session_id=%s",
                        g->parts.path, id, session);
    t->max_msg = max_msg > 0 ? (size_t)max_msg : (size_t)256 << 20;
    buf_init(&t->rx, t->max_msg);
    t->proto = KB_WS_LEGACY;

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = s_protocols;
    info.gid = (gid_t)-1;
    info.uid = (uid_t)-1;
    info.user = t;
    info.fd_limit_per_thread = 64;
    info.timeout_secs = 30;
    info.connect_timeout_secs = 10;
    if (g->parts.tls) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.client_ssl_ca_filepath = g->ca_file ? g->ca_file : SYSTEM_CA;
    }
    t->ctx = lws_create_context(&info);
    if (!t->ctx) {
        err_set(err, ERR_KERNEL,
                "cannot set up a WebSocket client for %s (libwebsockets)",
                g->shown);
        s_destroy(&t->base);
        return NULL;
    }
    int64_t deadline = clock_mono_ms() + timeout_ms;
    s_open_until(t, deadline);
    if (t->state != S_OPEN) {
        char *why = esc_dup(t->conn_error, ESC_NAME); /* may quote the server */
        if (t->http_status >= 300 && t->http_status < 400)
            err_set(err, ERR_KERNEL,
                    "the Jupyter server at %s answered the WebSocket of "
                    "kernel %s with a redirect (HTTP %d), which is not "
                    "followed (the token would go along); give --gateway "
                    "the server's own URL",
                    g->shown, id, t->http_status);
        else if (t->http_status == 401 || t->http_status == 403)
            err_set(err, ERR_KERNEL,
                    "the Jupyter server at %s refused the WebSocket of "
                    "kernel %s (HTTP %d); check the token",
                    g->shown, id, t->http_status);
        else if (t->http_status == 404)
            err_set(err, ERR_KERNEL,
                    "kernel %s is gone from the Jupyter server at %s "
                    "(deleted by someone else, or culled as idle)",
                    id, g->shown);
        else if (s_refused(t))
            err_set(err, ERR_KERNEL,
                    "the Jupyter server at %s refused the WebSocket of "
                    "kernel %s (HTTP %d); not retried",
                    g->shown, id, t->http_status);
        else
            err_set(err, ERR_KERNEL,
                    "cannot open the WebSocket of kernel %s on the Jupyter "
                    "server at %s: %s%s",
                    id, g->shown, t->state == S_CONNECTING ? "timed out" : why,
                    g->parts.tls ? " (for a private CA, name its certificate "
                                   "with --gateway-ca FILE)"
                                 : "");
        free(why);
        s_destroy(&t->base);
        return NULL;
    }
    return &t->base;
}
