/*
 * kb_gateway: kernels run by a Jupyter Server, Kernel Gateway or Enterprise
 * Gateway, reached over its REST API (libcurl) and its kernel WebSocket
 * (libwebsockets; Debian's libcurl has no WebSocket support).
 *
 *   GET    /api/kernelspecs                the kernels the server offers
 *   POST   /api/kernels {name, env}        start one (env: KERNEL_* values
 *                                          a gateway passes to its launcher)
 *   GET    /api/kernels/{id}               is it still there
 *   POST   /api/kernels/{id}/interrupt     interrupt, restart
 *   DELETE /api/kernels/{id}               shut it down
 *   WS     /api/kernels/{id}/channels?session_id=S   the messages
 *
 * Every request carries "Authorization: token T" when a token is given.
 * TLS certificates are checked (a custom CA file may be named); there is no
 * switch to turn the check off. The token is a secret: it is never put into
 * an error, a log line, or the URL this module reports (kb_gateway_url
 * drops user info, query and fragment).
 *
 * The server is untrusted like a kernel: REST bodies are capped, and the
 * WebSocket transport (kb_gateway_connect) caps each frame at max_msg
 * bytes, checks every binary offset (kb_wsmsg.h), drops and counts frames
 * for unknown channels, and stops reading while too much is queued.
 *
 * A gateway handle is single-threaded.
 */
#ifndef KERNEL_BRIDGE_KB_GATEWAY_H
#define KERNEL_BRIDGE_KB_GATEWAY_H

#include "common/err.h"
#include "kernel-bridge/transport/kb_transport.h"
#include "kernel-bridge/wire/kb_wsmsg.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct kb_gateway kb_gateway_t;

typedef struct kb_gateway_opts {
    const char *url;     /* http:// or https://host[:port][/base] */
    const char *token;   /* NULL or "" = none; a secret */
    const char *ca_file; /* PEM bundle to trust; NULL = the system's */
    char *const *env;    /* "KERNEL_X=V" entries sent with POST
                            /api/kernels; borrowed, NULL-terminated, or
                            NULL */
    int request_ms;      /* per REST request; 0 = 30 s */
    int reconnect_ms;    /* how long a dropped WebSocket is retried
                            before the kernel counts as lost; 0 = 10 s */
} kb_gateway_opts_t;

/* Check and copy the options (no request is made). NULL with ERR_USAGE
 * for a URL that is not http(s). */
kb_gateway_t *kb_gateway_new(const kb_gateway_opts_t *opts, err_t *err);
void kb_gateway_destroy(kb_gateway_t **g);

/* The server's URL as given, without user info, query or fragment (safe to
 * show and to record). Borrowed. */
const char *kb_gateway_url(const kb_gateway_t *g);

/* GET /api/kernelspecs: the response object (new reference), e.g.
 * {"default": "python3", "kernelspecs": {...}}. */
json_t *kb_gateway_kernelspecs(kb_gateway_t *g, err_t *err);

/* POST /api/kernels for kernelspec `name` (NULL = the server's default).
 * Returns the new kernel's id (caller frees). A 403 (a gateway's resource
 * limits) and an unknown kernelspec are ERR_KERNEL with the server's
 * reason; a refused token is ERR_KERNEL saying so. */
char *kb_gateway_start_kernel(kb_gateway_t *g, const char *name, err_t *err);
/* GET /api/kernels/{id}: 0 and its execution_state copied into state[64],
 * or -1: ERR_KERNEL "not found" (deleted or culled) or unreachable. */
int kb_gateway_kernel_state(kb_gateway_t *g, const char *id, char state[64],
                            err_t *err);
int kb_gateway_interrupt(kb_gateway_t *g, const char *id, err_t *err);
int kb_gateway_restart(kb_gateway_t *g, const char *id, err_t *err);
/* DELETE /api/kernels/{id}; a kernel already gone counts as deleted. */
int kb_gateway_delete(kb_gateway_t *g, const char *id, err_t *err);

/* Open the kernel's WebSocket with session id `session` (also the
 * header.session of our messages, so a reconnect gets the messages the
 * server buffered meanwhile). Waits up to `timeout_ms` for the socket.
 * The transport keeps a borrowed pointer to `g`, which must outlive it. */
kb_transport_t *kb_gateway_connect(kb_gateway_t *g, const char *id,
                                   const char *session, int64_t max_msg,
                                   int timeout_ms, err_t *err);

#endif
