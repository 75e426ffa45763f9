/*
 * kb_serve_impl: what the server (kb_serve.c) and the client
 * (kb_serve_client.c) of `serve` share: the message framing
 * (kb_serve_msg.c). Private to kernel-bridge/pool.
 */
#ifndef KERNEL_BRIDGE_POOL_KB_SERVE_IMPL_H
#define KERNEL_BRIDGE_POOL_KB_SERVE_IMPL_H

#include "common/err.h"

#include <jansson.h>

#define KB_SERVE_MAX_MSG (1 << 20) /* one request or reply */
#define KB_SERVE_MAX_FDS 4

/* Send `msg` (borrowed) with up to KB_SERVE_MAX_FDS fds as one packet:
 * 0, or -1 with errno. */
int kb_serve_send(int fd, json_t *msg, const int *fds, int nfds);

/* Receive one packet within timeout_ms (-1: no limit): 0 with *msg (new)
 * and the fds it carried (*nfds, at most KB_SERVE_MAX_FDS, owned by the
 * caller); 1 on EOF; -1 on error or timeout (errno). */
int kb_serve_recv(int fd, int timeout_ms, json_t **msg, int *fds, int *nfds);

void kb_serve_close_fds(int *fds, int n);

/* A JSON array of the strings of the NULL-terminated v. */
json_t *kb_serve_json_strv(char *const v[]);

/* The socket path to use: `path`, or the default (new string); NULL with
 * err when there is no safe default. */
char *kb_serve_path(const char *path, err_t *err);

#endif
