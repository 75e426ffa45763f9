/*
 * kb_zmq: one Jupyter message over one zmq socket, for both ends of the
 * protocol (kb_client and kb_server).
 *
 * The frames are hashed and parsed in place (zmq_msg_t, no copy); a message
 * of more than KB_ZMQ_MAX_FRAMES frames, or one kb_wire refuses (signature,
 * framing, size, depth), is dropped and counted, never returned.
 */
#ifndef KERNEL_BRIDGE_KB_ZMQ_H
#define KERNEL_BRIDGE_KB_ZMQ_H

#include "common/err.h"
#include "kernel-bridge/kb_msg.h"
#include "kernel-bridge/kb_wire.h"

#define KB_ZMQ_MAX_FRAMES 1024

/* Send `msg` signed with `key` as one multipart message. 0, or -1 with
 * ERR_KERNEL naming `what` (e.g. the channel); errno is kept from zmq so a
 * caller can tell EHOSTUNREACH (a ROUTER peer that is gone). */
int kb_zmq_send(void *sock, const kb_msg_t *msg, const kb_key_t *key,
                const char *what, err_t *err);

/* Receive one multipart message without blocking. Returns the message
 * (caller destroys), or NULL: nothing was waiting (err->code stays ERR_OK)
 * or the message was dropped (counted in *stats; err says why). `stats`
 * and `err` may be NULL. */
kb_msg_t *kb_zmq_recv(void *sock, const kb_key_t *key, kb_wire_stats_t *stats,
                      err_t *err);

#endif
