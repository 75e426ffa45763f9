/*
 * sb_egress_secret: --net-secret's spec, and the TLS configuration the
 * launcher hands the egress proxy (its fd 7, a sealed memfd): per secret
 * host the header and its value (read by the launcher from FILE; never in
 * the box, its environment or the proxy's argv) and the leaf certificate
 * minted for it; the one leaf key; the --net-ca certificates. No I/O.
 *
 *   --net-secret [http://]HOST:HEADER=@FILE
 *
 * HOST is a DNS name (lower-cased); HEADER a token that does not frame or
 * route a request (sb_egress_h1_header_ok); FILE the value's file. The
 * header goes on HTTPS requests to HOST; over plain HTTP only when the
 * spec starts with http:// (the value then crosses the network in clear),
 * else a plain request to HOST is refused.
 */
#ifndef SANDBOX_SB_EGRESS_SECRET_H
#define SANDBOX_SB_EGRESS_SECRET_H

#include "common/buf.h"
#include "common/err.h"
#include "sandbox/sb_egress_h1.h"
#include "sandbox/sb_egress_rule.h"

#include <stdbool.h>
#include <stddef.h>

#define SB_EGRESS_MAX_SECRETS 16
#define SB_EGRESS_CONF_MAX (1 << 20) /* bytes of the encoded configuration */

typedef struct sb_egress_secret_spec {
    char host[SB_EGRESS_HOST_MAX + 1];     /* normalised */
    char header[SB_EGRESS_HEADER_MAX + 1]; /* as written */
    const char *file;                      /* borrowed: into the spec */
    bool plain;                            /* http://: plain HTTP too */
} sb_egress_secret_spec_t;

/* Parse one --net-secret value. -1 with ERR_USAGE naming what is wrong. */
int sb_egress_secret_spec_parse(const char *spec, sb_egress_secret_spec_t *s,
                                err_t *err);

/* One host's secret as the proxy holds it. */
typedef struct sb_egress_secret {
    char host[SB_EGRESS_HOST_MAX + 1];
    char header[SB_EGRESS_HEADER_MAX + 1];
    bool plain;
    char *value; /* owned; no CR, LF or NUL */
    size_t value_len;
    char *chain_pem; /* owned; the leaf for host, then the session CA */
} sb_egress_secret_t;

typedef struct sb_egress_conf {
    char *leaf_key_pem;    /* owned; the key of every leaf */
    char *upstream_ca_pem; /* owned; --net-ca's certificates, or NULL */
    size_t n;
    sb_egress_secret_t s[SB_EGRESS_MAX_SECRETS];
} sb_egress_conf_t;

/* Check a secret's value (len bytes): no CR, LF, NUL, at most
 * SB_EGRESS_SECRET_MAX. 0 or -1 with `why` static text. */
int sb_egress_secret_value_ok(const char *v, size_t len, const char **why);

/* Records "TAG LEN\n" + LEN bytes + "\n". 0, or -1 past the cap. */
int sb_egress_conf_encode(const sb_egress_conf_t *c, buf_t *out);
/* The reverse into `c` (zeroed first); -1 with ERR_USAGE when malformed. */
int sb_egress_conf_decode(const char *data, size_t len, sb_egress_conf_t *c,
                          err_t *err);
/* Free and wipe what `c` owns. */
void sb_egress_conf_release(sb_egress_conf_t *c);

#endif
