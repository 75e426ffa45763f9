/*
 * kb_zmtp_sub: a kernel's iopub read on the caller's own thread, over a
 * plain socket speaking ZMTP 3.0 (kb_zmtp), in place of a libzmq SUB.
 *
 * Why: libzmq reads every socket on its I/O thread, which wakes once per
 * message the kernel publishes and hands each one across threads. For a
 * cell that streams outputs that wake-up cost more CPU than everything
 * else the client does per message (issue 19: 14-20 us of ~31 us), and no
 * libzmq option batches it. Read here, a stream of outputs arrives in a
 * few large read()s per batch of messages, and nothing crosses threads.
 * Only the SUB side of iopub is ours: it needs no identity, no outgoing
 * messages after the subscription, and no security mechanism but NULL.
 * Every other channel stays a libzmq socket, and so does iopub on an
 * endpoint this reader does not handle (inproc, a host name).
 *
 * Like libzmq it connects at once, retries every reconnect_ms while the
 * kernel has not bound yet, and reconnects when the connection drops or
 * the peer breaks the protocol (what was in flight is lost, as with a
 * libzmq SUB). Memory is bounded: a message over max_bytes is dropped as
 * its frame headers arrive, unbuffered.
 *
 * Single-threaded; all calls are non-blocking.
 */
#ifndef KERNEL_BRIDGE_KB_ZMTP_SUB_H
#define KERNEL_BRIDGE_KB_ZMTP_SUB_H

#include "kernel-bridge/wire/kb_wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kb_zmtp_sub kb_zmtp_sub_t;

typedef enum kb_zmtp_next {
    KB_ZMTP_SUB_NONE,    /* no complete message waiting */
    KB_ZMTP_SUB_MSG,     /* frames[0..*n) */
    KB_ZMTP_SUB_DROPPED, /* a message over max_bytes or max_frames */
} kb_zmtp_next_t;

/* A reader of `endpoint` ("ipc://PATH" or "tcp://IP:PORT" with a numeric
 * address), already connecting; NULL when the endpoint is not one of those
 * (the caller uses libzmq instead). */
kb_zmtp_sub_t *kb_zmtp_sub_new(const char *endpoint, size_t max_bytes,
                               size_t max_frames, int reconnect_ms);
void kb_zmtp_sub_destroy(kb_zmtp_sub_t **s);

/* What to poll: sets *fd (-1: nothing now) and *events (POLLIN when
 * `reading`, POLLOUT while connecting or writing the hello), and lowers
 * *timeout_ms (-1: none) to when a reconnect is due. True when a message
 * may already be buffered: the caller must not sleep. */
bool kb_zmtp_sub_poll_setup(kb_zmtp_sub_t *s, bool reading, int *fd,
                            short *events, int *timeout_ms);
/* After polling: finish a connect, write the hello, reconnect when due.
 * `revents` are the fd's (0 if it was not polled). */
void kb_zmtp_sub_poll_done(kb_zmtp_sub_t *s, short revents);

/* The next complete message, reading what the socket holds as needed.
 * On MSG the frames point into the reader's buffer and stay valid until
 * the next call. */
kb_zmtp_next_t kb_zmtp_sub_next(kb_zmtp_sub_t *s, kb_frame_t *frames,
                                size_t *n);

/* Change the byte cap (from the next call on, the message being received
 * included): a receiver whose budget is smaller than the message size cap
 * (kb_client, an execution's output budget) has what cannot fit dropped as
 * its frame headers arrive, never buffered. */
void kb_zmtp_sub_set_max_bytes(kb_zmtp_sub_t *s, size_t max_bytes);

/* True once the handshake with the current peer finished. */
bool kb_zmtp_sub_open(const kb_zmtp_sub_t *s);

#endif
