/*
 * e2b_pool: `e2b --pool N`, warm kernels of the server's own: a private
 * `serve` (kernel-bridge/pool/kb_serve.h) in a child process, with the
 * sandboxes' exact policy, on a socket in a fresh 0700 directory that
 * this process's sessions use ($JUPYTER_AGENT_SERVE_SOCKET). Without it a
 * running `jupyter-agent serve` whose policy matches is used as by every
 * command (its pool then needs the same flags; a mismatch starts cold).
 */
#ifndef AGENT_E2B_E2B_POOL_H
#define AGENT_E2B_E2B_POOL_H

#include "agent/session/ag_session.h"
#include "common/err.h"

typedef struct e2b_pool e2b_pool_t;

/* Fork the pool's server for `n` python3 kernels under `session`'s policy
 * as E2B sandboxes get it. Call before any thread starts. NULL + err. */
e2b_pool_t *e2b_pool_start(const ag_session_opts_t *session, unsigned n,
                           err_t *err);
/* Stop it (its kernels killed, the socket and directory removed). */
void e2b_pool_stop(e2b_pool_t **p);

#endif
