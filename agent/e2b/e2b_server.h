/*
 * e2b_server: `jupyter-agent e2b`, one HTTP server (libmicrohttpd) that
 * the official E2B SDKs drive unchanged with
 *   E2B_API_URL=http://ADDR:PORT E2B_SANDBOX_URL=http://ADDR:PORT
 *   E2B_API_KEY=e2b_...
 * Requests without an E2b-Sandbox-Id header go to the control plane
 * (agent/e2b/e2b_api.h, X-API-KEY checked); requests with one go to that
 * sandbox's envd (E2b-Sandbox-Port 49983: e2b_envd.h, e2b_process.h) or
 * code interpreter (49999: e2b_interp.h), each proven with the sandbox's
 * own access token (X-Access-Token or E2B-Traffic-Access-Token). With
 * debug_ports it also listens on 127.0.0.1:49999 and :49983, where
 * E2B_DEBUG=true clients reach one sandbox without tokens.
 *
 * Bounds (docs/security-model.md, "The E2B door"): request headers in
 * 64 KiB and within 10 s of the connection (or of the previous answer on
 * a kept-alive one), idle connections closed after 30 s, at most 1024
 * connections, JSON bodies of 16 MiB, uploads of the box's disk size.
 */
#ifndef AGENT_E2B_E2B_SERVER_H
#define AGENT_E2B_E2B_SERVER_H

#include "agent/session/ag_session.h"
#include "common/err.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct e2b_server_opts {
    const ag_session_opts_t *session; /* borrowed: policy, limits, kernel */
    const char *listen;       /* "ADDR:PORT" or "PORT"; NULL = 127.0.0.1:3000 */
    const char *api_key_file; /* first line: the key (^e2b_[0-9a-f]+$);
                                 NULL: any well-formed key (loopback only) */
    int max_sandboxes;        /* at once; 0 = 16 */
    bool debug_ports;         /* also 127.0.0.1:49999 and :49983 */
    unsigned pool;            /* warm kernels of our own (a private `serve`),
                                 0 = none (a running `serve` is still used) */
    int default_timeout_s;    /* 0 = 300 (E2B's default) */
    int max_timeout_s;        /* 0 = 86400 */
    uint64_t pause_disk_bytes; /* paused sandboxes' images and files at
                                  most (--pause-disk); 0 = no cap */
    /* Called once every port listens (the address printed); may be NULL. */
    void (*on_listening)(const char *url, void *arg);
    void *arg;
} e2b_server_opts_t;

/* Serve until *stop (a signal handler sets it). 0, or -1 + err: ERR_USAGE
 * for a refused option (a non-loopback address without a key file, a
 * malformed key), ERR_IO when a port cannot be bound. Every sandbox is
 * killed and removed before it returns. */
int e2b_server_run(const e2b_server_opts_t *o, volatile sig_atomic_t *stop,
                   err_t *err);

#endif
