/*
 * kb_zmq: one Jupyter message over one zmq socket, for both ends of the
 * protocol (kb_client and kb_server).
 *
 * The frames are hashed and parsed in place (zmq_msg_t, no copy). Before
 * anything is hashed or copied, a message is dropped and counted when it
 * has more than max_frames frames or more than max_bytes in all (libzmq
 * caps each frame with ZMQ_MAXMSGSIZE, but not their number or sum), and
 * when the receiver said which parent it waits for and the parent_header
 * frame does not mention it. A message past the frame or byte cap is
 * counted as oversized. Then kb_wire refuses what it must (signature,
 * framing, size, depth); nothing dropped is ever returned.
 */
#ifndef KERNEL_BRIDGE_KB_ZMQ_H
#define KERNEL_BRIDGE_KB_ZMQ_H

#include "common/err.h"
#include "kernel-bridge/kb_msg.h"
#include "kernel-bridge/kb_wire.h"

/* Frames of one message: identities, delimiter, signature, four JSON parts
 * and buffers. ipywidgets sends a handful of buffers; 64 is generous. */
#define KB_ZMQ_MAX_FRAMES 64

/* What one received message may be, checked before it is hashed. */
typedef struct kb_zmq_limits {
    size_t max_frames; /* 0 = KB_ZMQ_MAX_FRAMES (also the most allowed) */
    size_t max_bytes;  /* all frames together; 0 = no cap */
    /* When set: drop, unhashed and unparsed, a message whose parent_header
     * frame does not contain this text (counted as foreign). The receiver
     * ignores such messages anyway; dropping them before the HMAC makes a
     * flood of them cost next to nothing. */
    const char *parent_id;
    /* When set: drop the same way a message whose header frame does not
     * contain "status" (a receiver that stores no more outputs). */
    bool status_only;
    /* What each JSON part's parsed tree may cost beyond its length
     * (kb_wire_limits_t.json_allowance); 0 = the default. */
    size_t json_allowance;
} kb_zmq_limits_t;

/* Send `msg` signed with `key` as one multipart message. 0, or -1 with
 * ERR_KERNEL naming `what` (e.g. the channel); errno is kept from zmq so a
 * caller can tell EHOSTUNREACH (a ROUTER peer that is gone). */
int kb_zmq_send(void *sock, const kb_msg_t *msg, const kb_key_t *key,
                const char *what, err_t *err);

/* Receive one multipart message without blocking. Returns the message
 * (caller destroys), or NULL: nothing was waiting (err->code stays ERR_OK)
 * or the message was dropped (counted in *stats; err says why). `limits`,
 * `stats` and `err` may be NULL. */
kb_msg_t *kb_zmq_recv(void *sock, const kb_key_t *key,
                      const kb_zmq_limits_t *limits, kb_wire_stats_t *stats,
                      err_t *err);

/* The same checks and parse for the frames of one message received some
 * other way (kb_zmtp_sub): a message over `limits` or meant for someone
 * else is dropped, counted and NULL. `dropped`: the receiver already
 * dropped it over its own caps (no frames); it is counted and reported
 * the same way. `limits`, `stats` may be NULL. */
kb_msg_t *kb_zmq_parse_frames(const kb_frame_t *frames, size_t n, bool dropped,
                              const kb_key_t *key,
                              const kb_zmq_limits_t *limits,
                              kb_wire_stats_t *stats, err_t *err);

#endif
