/* The ZeroMQ transport: sockets to a local kernel (see kb_transport.h). */
#include "kb_transport.h"

#include "kernel-bridge/transport/kb_ipc.h"
#include "kernel-bridge/transport/kb_zmq.h"
#include "kernel-bridge/transport/kb_zmtp_sub.h"

#include "common/clock.h"
#include "common/xalloc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define HB_INTERVAL_MS 3000
#define HB_TIMEOUT_MS 10000
#define IOPUB_RCVHWM 100000
#define RECONNECT_IVL_MS 10

typedef struct s_zmq {
    kb_transport_t base;         /* first: a kb_transport_t * is an s_zmq_t * */
    void *zctx;                  /* zmq context, owned unless borrowed */
    bool borrowed_ctx;           /* zctx is the caller's */
    void *sock[KB_NCHANNELS];    /* owned sockets, indexed by channel; no
                                    iopub socket when `iopub` reads it */
    kb_zmtp_sub_t *iopub;        /* owned: iopub read on our thread, or NULL */
    size_t max_msg;              /* the message size cap */
    kb_ipc_t *ipc[KB_NCHANNELS]; /* owned, ipc transport only: each
                                    channel's socket file, pinned by inode;
                                    its sockets connect through it */
    bool all_pinned;             /* every ipc[] is pinned (or none exists) */
    kb_key_t *key;               /* owned HMAC key */
    char session[37];            /* routing id of shell, control and stdin */
    bool hb_pending;             /* a ping is out without its pong */
    void *stdin_mon;             /* owned PAIR: events of the stdin socket */
    bool stdin_ready;            /* stdin finished its ZMTP handshake */
    int64_t hb_sent_ms;          /* when that ping went out */
} s_zmq_t;

/* Watch `s` (the stdin socket) for its ZMTP handshake. Called before the
 * socket connects: a monitor started later misses a handshake that already
 * happened, which a warm kernel, bound long ago, finishes within a
 * millisecond of the connect (issue 19: readiness then waited forever). */
static void
s_monitor_stdin(s_zmq_t *c, void *s)
{
    char mon[80];
    snprintf(mon, sizeof mon, "inproc://kb-stdin-%s", c->session);
    if (zmq_socket_monitor(s, mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0) {
        c->stdin_mon = zmq_socket(c->zctx, ZMQ_PAIR);
        if (zmq_connect(c->stdin_mon, mon) != 0) {
            zmq_close(c->stdin_mon);
            c->stdin_mon = NULL;
        }
    }
}

/* A socket of `type` for `ch`, connecting to `endpoint` (`shown` in
 * messages: the connection file's, when endpoint is a pin's). */
static void *
s_socket(s_zmq_t *c, kb_channel_t ch, int type, const char *endpoint,
         const char *shown, int64_t max_msg, err_t *err)
{
    void *s = zmq_socket(c->zctx, type);
    if (!s) {
        err_set(err, ERR_KERNEL, "cannot create %s socket: %s",
                kb_channel_name(ch), zmq_strerror(errno));
        return NULL;
    }
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg);
    /* A kernel being started binds its sockets a while after we connect:
     * retry every RECONNECT_IVL_MS instead of libzmq's 100 ms, which made
     * a cold start wait up to 100 ms per channel after the bind. A failed
     * connect on ipc is one syscall; no back-off (ivl max 0). */
    int ivl = RECONNECT_IVL_MS, ivl_max = 0;
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
    if (type == ZMQ_DEALER)
        zmq_setsockopt(s, ZMQ_ROUTING_ID, c->session, strlen(c->session));
    if (type == ZMQ_SUB) {
        /* libzmq's default of 1000 queued messages drops outputs (and the
         * final idle status) whenever we fall behind a chatty cell. */
        int hwm = IOPUB_RCVHWM;
        zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    }
    if (type == ZMQ_REQ) { /* a lost pong must not wedge the socket */
        int on = 1;
        zmq_setsockopt(s, ZMQ_REQ_RELAXED, &on, sizeof on);
        zmq_setsockopt(s, ZMQ_REQ_CORRELATE, &on, sizeof on);
    }
    /* The kernel's stdin ROUTER drops an input_request addressed to a peer
     * whose handshake has not finished, so readiness includes it. */
    if (ch == KB_STDIN)
        s_monitor_stdin(c, s);
    if (zmq_connect(s, endpoint) != 0) {
        err_set(err, ERR_KERNEL, "cannot connect %s to %s: %s",
                kb_channel_name(ch), shown, zmq_strerror(errno));
        zmq_close(s);
        return NULL;
    }
    return s;
}

static void
s_destroy(kb_transport_t *t)
{
    s_zmq_t *c = (s_zmq_t *)t;
    if (c->stdin_mon) {
        zmq_socket_monitor(c->sock[KB_STDIN], NULL, 0);
        zmq_close(c->stdin_mon);
    }
    for (int ch = 0; ch < KB_NCHANNELS; ch++)
        if (c->sock[ch])
            zmq_close(c->sock[ch]);
    kb_zmtp_sub_destroy(&c->iopub);
    if (c->zctx && !c->borrowed_ctx)
        zmq_ctx_term(c->zctx);
    for (int ch = 0; ch < KB_NCHANNELS; ch++) /* after their sockets */
        kb_ipc_destroy(&c->ipc[ch]);
    kb_key_destroy(&c->key);
    free(c);
}

/* Consume monitor events; true once the stdin handshake succeeded. */
static bool
s_ready(kb_transport_t *t)
{
    s_zmq_t *c = (s_zmq_t *)t;
    while (!c->stdin_ready && c->stdin_mon) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, c->stdin_mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            break;
        }
        bool more = zmq_msg_more(&ev);
        if (zmq_msg_size(&ev) >= 2) {
            uint16_t event;
            memcpy(&event, zmq_msg_data(&ev), sizeof event);
            if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
                c->stdin_ready = true;
        }
        zmq_msg_close(&ev);
        while (more) { /* the endpoint frame */
            zmq_msg_init(&ev);
            zmq_msg_recv(&ev, c->stdin_mon, 0);
            more = zmq_msg_more(&ev);
            zmq_msg_close(&ev);
        }
    }
    return c->stdin_ready;
}

static int
s_send(kb_transport_t *t, kb_channel_t ch, const kb_msg_t *msg, err_t *err)
{
    s_zmq_t *c = (s_zmq_t *)t;
    return kb_zmq_send(c->sock[ch], msg, c->key, kb_channel_name(ch), err);
}

static kb_msg_t *
s_recv(kb_transport_t *t, kb_channel_t ch, const kb_frames_limits_t *lim,
       kb_wire_stats_t *stats, err_t *err)
{
    s_zmq_t *c = (s_zmq_t *)t;
    if (ch != KB_IOPUB || !c->iopub)
        return kb_zmq_recv(c->sock[ch], c->key, lim, stats, err);
    kb_frame_t frames[KB_FRAMES_MAX];
    size_t n = 0;
    err_clear(err);
    /* The receiver's cap (lower while an execution's output budget is
     * smaller) applies as frame headers arrive. */
    kb_zmtp_sub_set_max_bytes(c->iopub, lim && lim->max_bytes &&
                                                lim->max_bytes < c->max_msg
                                            ? lim->max_bytes
                                            : c->max_msg);
    kb_zmtp_next_t r = kb_zmtp_sub_next(c->iopub, frames, &n);
    if (r == KB_ZMTP_SUB_NONE)
        return NULL;
    return kb_frames_parse(frames, n, r == KB_ZMTP_SUB_DROPPED, c->key, lim,
                           stats, err);
}

/* Look at the channels' socket files again (kb_ipc_refresh): only those
 * not pinned yet when `unpinned_only` (the kernel is starting), else all
 * (a socket file replaced by a link is refused, and said so). -1 with
 * ERR_KERNEL naming the channel when one was refused. */
static int
s_refresh(s_zmq_t *c, bool unpinned_only, err_t *err)
{
    if (unpinned_only && c->all_pinned)
        return 0;
    bool all = true;
    for (int ch = 0; ch < KB_NCHANNELS; ch++) {
        if (!c->ipc[ch] || (unpinned_only && kb_ipc_pinned(c->ipc[ch])))
            continue;
        if (kb_ipc_refresh(c->ipc[ch], err) < 0)
            return err_prefix(err, "%s", kb_channel_name((kb_channel_t)ch));
        all &= kb_ipc_pinned(c->ipc[ch]);
    }
    if (!unpinned_only || all)
        c->all_pinned = all;
    return 0;
}

/* Heartbeat bookkeeping while waiting: returns -1 when the kernel has not
 * answered a ping for HB_TIMEOUT_MS. */
static int
s_tick(kb_transport_t *t, bool heartbeat, err_t *err)
{
    s_zmq_t *c = (s_zmq_t *)t;
    if (s_refresh(c, false, err))
        return -1;
    if (!heartbeat)
        return 0;
    int64_t now = clock_mono_ms();
    if (c->hb_pending) {
        char buf[64];
        if (zmq_recv(c->sock[KB_HB], buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
            c->hb_pending = false;
        else if (now - c->hb_sent_ms > HB_TIMEOUT_MS)
            return err_set(err, ERR_KERNEL,
                           "the kernel stopped answering its heartbeat");
    } else if (now - c->hb_sent_ms > HB_INTERVAL_MS) {
        if (zmq_send(c->sock[KB_HB], "ping", 4, ZMQ_DONTWAIT) == 4) {
            c->hb_pending = true;
            c->hb_sent_ms = now;
        }
    }
    return 0;
}

/* Wait up to `ms` for any socket in `mask` (bit per channel) or the watch
 * fd. Returns a bitmask of ready channels, KB_TRANSPORT_GONE for the watch
 * fd, or 0 on timeout. */
static unsigned
s_poll(kb_transport_t *t, unsigned mask, int watch_fd, int ms)
{
    s_zmq_t *c = (s_zmq_t *)t;
    zmq_pollitem_t items[KB_NCHANNELS + 1];
    int map[KB_NCHANNELS + 1];
    int n = 0, own = -1; /* own: the item of our iopub fd */
    unsigned ready = 0;
    for (int ch = 0; ch < KB_NCHANNELS; ch++)
        if ((mask & (1u << ch)) && c->sock[ch]) {
            items[n] = (zmq_pollitem_t){c->sock[ch], 0, ZMQ_POLLIN, 0};
            map[n++] = ch;
        }
    if (c->iopub) {
        int fd;
        short ev;
        if (kb_zmtp_sub_poll_setup(c->iopub, mask & (1u << KB_IOPUB), &fd, &ev,
                                   &ms)) {
            ready |= 1u << KB_IOPUB; /* buffered: look, do not sleep */
            ms = 0;
        }
        if (fd >= 0) {
            short zev = (short)(((ev & POLLIN) ? ZMQ_POLLIN : 0) |
                                ((ev & POLLOUT) ? ZMQ_POLLOUT : 0));
            items[n] = (zmq_pollitem_t){NULL, fd, zev, 0};
            own = n;
            map[n++] = KB_IOPUB;
        }
    }
    if (watch_fd >= 0) {
        items[n] = (zmq_pollitem_t){NULL, watch_fd, ZMQ_POLLIN, 0};
        map[n++] = KB_NCHANNELS;
    }
    /* A kernel being started binds its sockets a while after we connect:
     * look for them as often as libzmq would retry the connect. */
    if (!c->all_pinned && (ms < 0 || ms > RECONNECT_IVL_MS))
        ms = RECONNECT_IVL_MS;
    int rc = zmq_poll(items, n, ms);
    (void)s_refresh(c, true, NULL); /* a refusal is reported by tick */
    if (c->iopub) {
        short zr = rc > 0 && own >= 0 ? items[own].revents : 0;
        kb_zmtp_sub_poll_done(c->iopub,
                              (short)(((zr & ZMQ_POLLIN) ? POLLIN : 0) |
                                      ((zr & ZMQ_POLLOUT) ? POLLOUT : 0) |
                                      ((zr & ZMQ_POLLERR) ? POLLERR : 0)));
    }
    for (int i = 0; rc > 0 && i < n; i++)
        if (items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR) &&
            (i != own || (mask & (1u << KB_IOPUB))))
            ready |= 1u << map[i];
    return ready;
}

static int
s_ping(kb_transport_t *t, int timeout_ms)
{
    s_zmq_t *c = (s_zmq_t *)t;
    char buf[64];
    (void)s_refresh(c, true, NULL);
    if (c->hb_pending) { /* collect an old pong first */
        zmq_pollitem_t it = {c->sock[KB_HB], 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, timeout_ms) <= 0)
            return -1;
        zmq_recv(c->sock[KB_HB], buf, sizeof buf, 0);
        c->hb_pending = false;
    }
    if (zmq_send(c->sock[KB_HB], "ping", 4, 0) != 4)
        return -1;
    zmq_pollitem_t it = {c->sock[KB_HB], 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0) {
        c->hb_pending = true;
        c->hb_sent_ms = clock_mono_ms();
        return -1;
    }
    zmq_recv(c->sock[KB_HB], buf, sizeof buf, 0);
    return 0;
}

static const kb_transport_ops_t s_ops = {
    .send = s_send,
    .recv = s_recv,
    .poll = s_poll,
    .tick = s_tick,
    .ready = s_ready,
    .ping = s_ping,
    .destroy = s_destroy,
};

kb_transport_t *
kb_transport_zmq_new(const kb_conn_t *conn, const char *session,
                     int64_t max_msg, void *zmq_ctx, err_t *err)
{
    static const int types[KB_NCHANNELS] = {[KB_SHELL] = ZMQ_DEALER,
                                            [KB_IOPUB] = ZMQ_SUB,
                                            [KB_STDIN] = ZMQ_DEALER,
                                            [KB_CONTROL] = ZMQ_DEALER,
                                            [KB_HB] = ZMQ_REQ};
    s_zmq_t *c = xcalloc(1, sizeof *c);
    c->base.ops = &s_ops;
    c->borrowed_ctx = zmq_ctx != NULL;
    c->zctx = zmq_ctx ? zmq_ctx : zmq_ctx_new();
    c->key = kb_key_new(conn->key, strlen(conn->key));
    snprintf(c->session, sizeof c->session, "%s", session);
    char shown[KB_NCHANNELS][256];
    const char *endpoint[KB_NCHANNELS];
    c->all_pinned = true;
    for (int ch = 0; ch < KB_NCHANNELS; ch++) {
        kb_conn_endpoint(conn, (kb_channel_t)ch, shown[ch], sizeof shown[ch]);
        endpoint[ch] = shown[ch];
        /* Never a path the kernel can change: its socket file by inode. */
        if (!strcmp(conn->transport, "ipc")) {
            c->ipc[ch] = kb_ipc_new(shown[ch] + strlen("ipc://"), err);
            if (!c->ipc[ch]) {
                err_prefix(err, "%s", kb_channel_name((kb_channel_t)ch));
                s_destroy(&c->base);
                return NULL;
            }
            endpoint[ch] = kb_ipc_endpoint(c->ipc[ch]);
            c->all_pinned &= kb_ipc_pinned(c->ipc[ch]);
        }
    }
    c->max_msg = (size_t)max_msg;
    c->iopub = kb_zmtp_sub_new(endpoint[KB_IOPUB], (size_t)max_msg,
                               KB_FRAMES_MAX, RECONNECT_IVL_MS);
    for (int ch = 0; ch < KB_NCHANNELS; ch++) {
        if (ch == KB_IOPUB && c->iopub)
            continue;
        c->sock[ch] = s_socket(c, (kb_channel_t)ch, types[ch], endpoint[ch],
                               shown[ch], max_msg, err);
        if (!c->sock[ch]) {
            s_destroy(&c->base);
            return NULL;
        }
    }
    if (!c->stdin_mon)
        c->stdin_ready = true; /* cannot tell: do not wait for it */
    return &c->base;
}
