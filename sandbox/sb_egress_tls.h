/*
 * sb_egress_tls: TLS termination in the egress proxy for --net-secret
 * hosts (OpenSSL). For CONNECT to such a host the proxy first opens TLS
 * upstream, verifying the certificate against the host's trust store
 * (plus --net-ca) and the host name, and refuses with a 502 naming why
 * before the box is told 200; then it answers the box's ClientHello with
 * the leaf the launcher minted for that host (SNI must be the CONNECT
 * host; ALPN offers http/1.1 only), and passes each request through
 * sb_egress_h1 (the secret's header in place of the box's) and every
 * response back unchanged. Hosts without a secret never reach this file:
 * their TLS stays end to end.
 */
#ifndef SANDBOX_SB_EGRESS_TLS_H
#define SANDBOX_SB_EGRESS_TLS_H

#include "common/err.h"
#include "sandbox/sb_egress_pump.h"
#include "sandbox/sb_egress_secret.h"

#include <stddef.h>

/* Read the configuration (sb_egress_secret.h) from `fd` and build the
 * TLS contexts; call before dropping privileges (the trust store is
 * read here). 0, or -1 with `err`. */
int sb_egress_tls_load(int fd, err_t *err);

/* The secret for requests to `host` (normalised), or NULL. */
const sb_egress_secret_t *sb_egress_tls_secret(const char *host);

typedef struct sb_egress_tls_job {
    int box;              /* the box's connection (CONNECT read, no reply) */
    int up;               /* connected to upstream */
    const char *host;     /* the CONNECT host, normalised, with a secret */
    unsigned port;        /* the CONNECT port */
    sb_egress_pump_t *pp; /* caps and session totals; out: up, down */
    int status;           /* out: refused before the 200: 400 or 502 */
    unsigned requests;    /* out: requests passed with the header */
    char why[768];        /* out: why refused, or how it ended */
} sb_egress_tls_job_t;

/* Serve one CONNECT to a secret host. 0 once the box was told 200 (`why`
 * says how it ended), -1 when refused before that (`status`, `why`: the
 * caller answers the box). */
int sb_egress_tls_serve(sb_egress_tls_job_t *j);

#endif
