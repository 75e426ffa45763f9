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
 * counted as oversized. The limits and the judging are kb_frames' (the
 * wire layer), shared with every other transport.
 */
#ifndef KERNEL_BRIDGE_KB_ZMQ_H
#define KERNEL_BRIDGE_KB_ZMQ_H

#include "common/err.h"
#include "kernel-bridge/wire/kb_frames.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

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
                      const kb_frames_limits_t *limits, kb_wire_stats_t *stats,
                      err_t *err);

#endif
