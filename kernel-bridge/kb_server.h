/*
 * kb_server: the kernel side of the Jupyter protocol over libzmq, so a
 * program can BE a kernel (the agent kernel is one).
 *
 * Sockets, bound to the endpoints of a kb_conn_t: shell, control and stdin
 * are ROUTERs, iopub a PUB, heartbeat a ROUTER echoing every message back to
 * its sender (ipykernel's zmq.device(QUEUE, hb, hb)) on a dedicated thread,
 * so pings are answered even while a handler runs for minutes. Every socket
 * caps message size (ZMQ_MAXMSGSIZE). A message whose signature is missing
 * or wrong is dropped and counted (kb_server_stats) before any JSON is
 * parsed; malformed ones likewise.
 *
 * Requests are dispatched through two handler tables, msg_type ->
 * function (xeus style): one for shell, one for control. Around every
 * request the server publishes status "busy" and then "idle" on iopub with
 * the request as parent. Control has its own thread (like ipykernel's), so
 * an interrupt_request or shutdown_request is answered at once even while a
 * shell handler is blocked in a model call or an inner execution. Built-in
 * control handlers, replaceable by registering the same msg_type:
 *   interrupt_request  replies ok and latches KB_SERVER_INTERRUPT;
 *   shutdown_request   replies (and broadcasts the reply on iopub when the
 *                      server is destroyed), latches KB_SERVER_SHUTDOWN,
 *                      and kb_server_run returns.
 * Anything unknown is logged and left unanswered (as ipykernel does).
 *
 * A handler that runs long sees the latched events through
 * kb_server_poll_control() / kb_server_events(), or hands
 * kb_server_cancel_flag() to code that polls an atomic flag (the LLM
 * provider does).
 *
 * Threads: the thread that calls kb_server_run / serve_once owns shell and
 * stdin and runs shell handlers; the control thread (started by the first
 * serve) owns control and runs control handlers; the heartbeat thread owns
 * its socket. iopub is shared under a mutex, events are atomic. Register
 * handlers before the first serve. Ownership: the server owns its sockets,
 * context, key, threads and handler tables; messages passed to handlers are
 * borrowed and live until the handler returns.
 */
#ifndef KERNEL_BRIDGE_KB_SERVER_H
#define KERNEL_BRIDGE_KB_SERVER_H

#include "common/err.h"
#include "kernel-bridge/kb_conn.h"
#include "kernel-bridge/wire/kb_msg.h"
#include "kernel-bridge/wire/kb_wire.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct kb_server kb_server_t;

typedef struct kb_server_opts {
    bool allow_unsigned;   /* accept a connection with an empty key */
    int64_t max_msg_bytes; /* ZMQ_MAXMSGSIZE per socket; 0 = 64 MiB */
    const char *username;  /* header.username; NULL = "kernel" */
} kb_server_opts_t;

/* Events latched by the server until cleared (bits). */
#define KB_SERVER_INTERRUPT 1u /* an interrupt_request (or raised by hand) */
#define KB_SERVER_SHUTDOWN 2u  /* a shutdown_request, or kb_server_stop */

/* A request handler. `ch` is KB_SHELL or KB_CONTROL (and the handler runs
 * on that channel's thread); `req` is borrowed. Return 0, or -1 to have the
 * failure logged (the server keeps serving; the handler should still have
 * replied). A control handler may only reply, publish and touch events. */
typedef int (*kb_handler_fn)(kb_server_t *s, kb_channel_t ch,
                             const kb_msg_t *req, void *arg);

/* Bind every channel of `conn` (copied). Fails with ERR_USAGE on an empty
 * key unless allow_unsigned, ERR_KERNEL when a socket cannot be bound. */
kb_server_t *kb_server_new(const kb_conn_t *conn, const kb_server_opts_t *opts,
                           err_t *err);
/* Stops the heartbeat thread, closes every socket. NULL is fine. */
void kb_server_destroy(kb_server_t **s);

/* Map msg_type on shell (kb_server_on) or control (kb_server_on_control)
 * to `fn`, replacing a previous entry, built-ins included; fn NULL removes
 * it. `arg` is passed to fn. Only before the first serve. */
void kb_server_on(kb_server_t *s, const char *msg_type, kb_handler_fn fn,
                  void *arg);
void kb_server_on_control(kb_server_t *s, const char *msg_type,
                          kb_handler_fn fn, void *arg);

/* Serve shell and control until a shutdown is latched. Returns 0 then. */
int kb_server_run(kb_server_t *s);
/* Serve for at most timeout_ms (one poll round, dispatching everything
 * that arrived); returns the latched events. For callers with their own
 * loop and for tests. */
unsigned kb_server_serve_once(kb_server_t *s, int timeout_ms);
/* Latch KB_SERVER_SHUTDOWN; async-signal-safe. */
void kb_server_stop(kb_server_t *s);

/* For handlers that run long: wait up to timeout_ms (0 = just look) until
 * an interrupt or shutdown is latched; return the latched events
 * (KB_SERVER_INTERRUPT | KB_SERVER_SHUTDOWN bits). Control requests are
 * served by their own thread meanwhile; shell requests stay queued until
 * the running handler returns. */
unsigned kb_server_poll_control(kb_server_t *s, int timeout_ms);
unsigned kb_server_events(const kb_server_t *s);
/* Non-zero while an interrupt or shutdown is latched; for code that polls
 * an atomic flag (ag_provider_set_cancel). Valid while the server lives. */
const atomic_int *kb_server_cancel_flag(const kb_server_t *s);
/* Latch an event by hand. Async-signal-safe (SIGINT in signal interrupt
 * mode, SIGTERM). */
void kb_server_raise(kb_server_t *s, unsigned events);
/* Forget a latched interrupt. The server does this before each shell
 * request: an interrupt that arrives while idle interrupts nothing. */
void kb_server_clear_interrupt(kb_server_t *s);

/* After an execute_request failed with stop_on_error, BEFORE replying to
 * it: hold every shell request that has arrived by now; once the current
 * handler returns, each held execute_request is answered "aborted"
 * (ipykernel's _abort_queues) and the others are dispatched in order.
 * Requests sent after the client saw the failed reply are not affected.
 * Returns how many execute_requests will be aborted. */
int kb_server_abort_queued(kb_server_t *s);

/* Reply to `req` on `ch` (its identities and header as parent) with
 * `reply_type` and `content` (stolen). */
int kb_server_reply(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                    const char *reply_type, json_t *content, err_t *err);
/* Publish msg_type/content (stolen) on iopub with `parent` (may be NULL)
 * as parent header. The topic frame is "kernel.<session>.<msg_type>". */
int kb_server_publish(kb_server_t *s, const kb_msg_t *parent,
                      const char *msg_type, json_t *content, err_t *err);
/* Shorthands for kb_server_publish. */
int kb_server_status(kb_server_t *s, const kb_msg_t *parent, const char *state);
int kb_server_stream(kb_server_t *s, const kb_msg_t *parent, const char *name,
                     const char *text);

/* input() for `parent` (an execute_request, which must have allowed
 * stdin): send input_request on stdin to the parent's identities and wait
 * for the input_reply (shell thread only). Returns the
 * value (malloc'd; caller frees), or NULL with ERR_INTERRUPTED when an
 * interrupt or shutdown was latched, ERR_TIMEOUT after timeout_ms (<= 0 =
 * no limit). */
char *kb_server_input(kb_server_t *s, const kb_msg_t *parent,
                      const char *prompt, bool password, int timeout_ms,
                      err_t *err);

/* What was accepted and dropped, summed over every channel. */
const kb_wire_stats_t *kb_server_stats(const kb_server_t *s);

#endif
