/*
 * kb_transport: how a kb_client moves Jupyter messages to and from one
 * kernel. The client keeps the execute model (parent matching, reply and
 * idle, output caps, stdin, bounded drain rounds); a transport only sends a
 * message on a channel, hands back the next message waiting on a channel,
 * waits for any of them, and says whether the kernel is still there.
 *
 * Implementations: ZeroMQ sockets to a local kernel (kb_transport_zmq_new,
 * below; its iopub is read on the caller's thread by kb_zmtp_sub) and a
 * Jupyter Server's WebSocket (kb_gateway.h).
 *
 * Every operation is non-blocking except poll() and ping(), which wait at
 * most the milliseconds they are given. A transport is single-threaded,
 * like the client that owns it.
 */
#ifndef KERNEL_BRIDGE_KB_TRANSPORT_H
#define KERNEL_BRIDGE_KB_TRANSPORT_H

#include "common/err.h"
#include "kernel-bridge/kb_conn.h"
#include "kernel-bridge/wire/kb_frames.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct kb_transport kb_transport_t;

/* Bit of poll()'s result that means "the kernel is gone" (the watch fd
 * became readable, or the remote side said so). */
#define KB_TRANSPORT_GONE (1u << KB_NCHANNELS)

typedef struct kb_transport_ops {
    /* Send `msg` (borrowed) on `ch`. 0, or -1 with ERR_KERNEL. */
    int (*send)(kb_transport_t *t, kb_channel_t ch, const kb_msg_t *msg,
                err_t *err);
    /* The next message waiting on `ch`, without blocking (caller destroys).
     * NULL: nothing waiting (err->code stays ERR_OK), or a message was
     * dropped under `lim` (counted in *stats; err says why). */
    kb_msg_t *(*recv)(kb_transport_t *t, kb_channel_t ch,
                      const kb_frames_limits_t *lim, kb_wire_stats_t *stats,
                      err_t *err);
    /* Wait up to `ms` for a message on any channel in `mask` (bit per
     * channel) or for `watch_fd` (-1: none) to become readable. Returns
     * the ready channel bits, KB_TRANSPORT_GONE, or 0 on timeout. */
    unsigned (*poll)(kb_transport_t *t, unsigned mask, int watch_fd, int ms);
    /* Called about every 100 ms while waiting; `heartbeat` says whether
     * the caller asked for heartbeat checks. -1 with ERR_KERNEL once the
     * kernel is known to be gone. */
    int (*tick)(kb_transport_t *t, bool heartbeat, err_t *err);
    /* True once input_request messages can reach us (ZMQ: the stdin
     * socket finished its handshake). */
    bool (*ready)(kb_transport_t *t);
    /* Add to *stats what was refused on arrival and not yet reported
     * through recv (a frame too large, malformed or for no channel, that
     * left nothing to receive). NULL when recv reports every drop. */
    void (*collect)(kb_transport_t *t, kb_wire_stats_t *stats);
    /* One liveness round trip within `ms`: 0 alive, -1 not. */
    int (*ping)(kb_transport_t *t, int ms);
    void (*destroy)(kb_transport_t *t);
} kb_transport_ops_t;

/* Every transport struct starts with this. */
struct kb_transport {
    const kb_transport_ops_t *ops;
};

/* ZeroMQ sockets to the kernel described by `conn` (borrowed): shell,
 * control and stdin DEALERs with routing identity `session`, an iopub SUB
 * subscribed to everything (kb_zmtp_sub; a libzmq SUB for an inproc or
 * host-name endpoint), a heartbeat REQ; every frame capped at `max_msg`
 * bytes (iopub: every message). Messages are signed and checked with `key`
 * (copied). `zmq_ctx`: a borrowed context that outlives the transport, or NULL
 * for one of its own. */
kb_transport_t *kb_transport_zmq_new(const kb_conn_t *conn, const char *session,
                                     int64_t max_msg, void *zmq_ctx,
                                     err_t *err);

#endif
