/*
 * kb_client: the client side of the Jupyter protocol: the execute model
 * over a transport (kb_transport.h; ZeroMQ sockets unless said otherwise).
 *
 * Sockets: shell, control and stdin are DEALERs sharing one routing
 * identity (so the kernel routes input_request to our stdin), iopub is a
 * SUB subscribed to everything, heartbeat a REQ. Every socket caps each
 * frame (ZMQ_MAXMSGSIZE = max_msg_bytes) and lingers 0 ms on close.
 *
 * A kernel is hostile (code in it can sign anything). Before a message is
 * hashed or copied it is dropped when it has more than KB_FRAMES_MAX
 * frames or more than max_msg_bytes in all; while an execution waits, iopub
 * messages of other parents (and, once its output cap is reached, all but
 * status) are dropped unhashed. Messages failing the signature check are
 * dropped and counted (kb_client_stats). Every receive loop reads at most
 * a bounded number of messages or milliseconds per round before it looks
 * at its deadline, the kernel's death and should_stop again, so no flood
 * keeps a wait from returning.
 *
 * A client is single-threaded: call it from one thread only.
 */
#ifndef KERNEL_BRIDGE_KB_CLIENT_H
#define KERNEL_BRIDGE_KB_CLIENT_H

#include "common/err.h"
#include "kernel-bridge/kb_conn.h"
#include "kernel-bridge/kb_output.h"
#include "kernel-bridge/transport/kb_transport.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct kb_client kb_client_t;

typedef struct kb_client_opts {
    bool allow_unsigned;   /* accept an empty key (else refuse to connect) */
    int64_t max_msg_bytes; /* per frame and per message; 0 = 256 MiB */
    size_t
        max_output_bytes; /* cap on stored output per execution; 0 = 64 MiB */
    const char *username; /* header.username; NULL = "jupyter-agent" */
    /* Borrowed zmq context shared with a peer in this process (transport
     * "inproc", e.g. a scripted kernel in a fuzz target); it must outlive
     * the client. NULL = a context of the client's own. */
    void *zmq_ctx;
} kb_client_opts_t;

/* Callbacks during an execution; every member may be NULL. */
typedef struct kb_exec_hooks {
    /* Each iopub message of this execution, after it was applied to the
     * output model (msg borrowed). Used to stream outputs as they come. */
    void (*on_iopub)(const kb_msg_t *msg, void *arg);
    /* input() in the kernel: return a malloc'd reply (we free it), or NULL
     * to answer with an empty line. */
    char *(*on_input)(const char *prompt, bool password, void *arg);
    /* Called about every 100 ms; return true to stop waiting now (e.g. the
     * user pressed Ctrl-C). The wait then fails with ERR_INTERRUPTED. */
    bool (*should_stop)(void *arg);
    void *arg;
} kb_exec_hooks_t;

typedef struct kb_exec_opts {
    bool silent;
    bool store_history;       /* default in kb_exec_opts_init: true */
    json_t *user_expressions; /* borrowed object or NULL */
    bool allow_stdin;
    bool stop_on_error; /* default true */
} kb_exec_opts_t;

void kb_exec_opts_init(kb_exec_opts_t *o);

/* Connect to the kernel described by `conn` (copied). */
kb_client_t *kb_client_new(const kb_conn_t *conn, const kb_client_opts_t *opts,
                           err_t *err);
/* A client over another transport (e.g. a Jupyter Server's WebSocket,
 * kb_gateway.h): takes ownership of *tp and NULLs it. `session` is the
 * header.session of our messages (NULL: a new one). Never fails. */
kb_client_t *kb_client_new_transport(kb_transport_t **tp, const char *session,
                                     const kb_client_opts_t *opts);
void kb_client_destroy(kb_client_t **c);

/* An fd that becomes readable when the kernel is gone (a pidfd); -1 for
 * none. Waits then fail fast with ERR_KERNEL instead of timing out. */
void kb_client_watch_fd(kb_client_t *c, int fd);
/* Use the heartbeat channel to detect a dead kernel while waiting (for
 * kernels we did not start and so have no pidfd for). */
void kb_client_use_heartbeat(kb_client_t *c, bool on);

/* What was accepted and dropped so far, the transport's refusals on
 * arrival included. */
const kb_wire_stats_t *kb_client_stats(kb_client_t *c);

/* Send a request on shell or control and wait for its reply (matched by
 * parent msg_id) until `timeout_ms`. `content` is stolen. Returns the reply
 * (caller destroys) or NULL with ERR_TIMEOUT / ERR_KERNEL. */
kb_msg_t *kb_client_request(kb_client_t *c, kb_channel_t ch,
                            const char *msg_type, json_t *content,
                            int timeout_ms, err_t *err);

/* Send a shell message that has no reply (comm_open, comm_msg,
 * comm_close; `content` stolen), then pass every iopub message whose
 * parent it is to `on_iopub` (msg borrowed; may be NULL) until the kernel
 * reports idle for it, or `timeout_ms`. 0, or -1 with ERR_TIMEOUT /
 * ERR_KERNEL. */
int kb_client_send_pump(kb_client_t *c, const char *msg_type, json_t *content,
                        void (*on_iopub)(const kb_msg_t *msg, void *arg),
                        void *arg, int timeout_ms, err_t *err);

/* Wait until the kernel answers kernel_info on shell AND iopub delivers its
 * status, so no output of the next request can be missed. Returns the
 * kernel_info_reply (caller destroys). */
kb_msg_t *kb_client_wait_ready(kb_client_t *c, int timeout_ms, err_t *err);

/* One execution in flight. Created by kb_client_execute_start, consumed by
 * kb_client_execute_wait / kb_client_execute_finish. */
typedef struct kb_exec kb_exec_t;

kb_exec_t *kb_client_execute_start(kb_client_t *c, const char *code,
                                   const kb_exec_opts_t *opts, err_t *err);
/* Pump messages into `out` until the execution is complete (execute_reply
 * and iopub idle both seen: returns 0), `deadline_ms` (CLOCK_MONOTONIC ms,
 * see common/clock.h; <= 0 = none) passes (ERR_TIMEOUT), the kernel dies
 * (ERR_KERNEL), or should_stop says so (ERR_INTERRUPTED). May be called
 * again after a timeout (e.g. after interrupting the kernel). */
int kb_client_execute_wait(kb_client_t *c, kb_exec_t *x, kb_output_t *out,
                           const kb_exec_hooks_t *hooks, int64_t deadline_ms,
                           err_t *err);
void kb_exec_destroy(kb_exec_t **x);

/* One round trip on the heartbeat channel within timeout_ms: 0 alive. */
int kb_client_heartbeat(kb_client_t *c, int timeout_ms);

#endif
