/*
 * sb_egress_ca: the per-session certificate authority of --net-secret
 * (OpenSSL). The launcher makes one per box: an EC P-256 CA valid 30
 * days whose name constraints permit only the secret hosts, one leaf key,
 * and one leaf per secret host (SAN = that name, serverAuth) signed by
 * it; then the CA's private key is freed and wiped, so it exists nowhere
 * but in this process for the moment of signing: not on disk, not in the
 * proxy, never in the box. The box trusts the CA's certificate only
 * (its bundle, sb_sandbox_plan.c); the proxy gets the leaves and their
 * key (sb_egress_secret.h).
 */
#ifndef SANDBOX_SB_EGRESS_CA_H
#define SANDBOX_SB_EGRESS_CA_H

#include "common/err.h"

#include <stddef.h>

typedef struct sb_egress_ca sb_egress_ca_t;

/* A new CA with a leaf for each of hosts[0..n) (DNS names). NULL with
 * ERR_SANDBOX when OpenSSL fails. */
sb_egress_ca_t *sb_egress_ca_new(const char *const hosts[], size_t n,
                                 err_t *err);
void sb_egress_ca_destroy(sb_egress_ca_t **ca);

/* Borrowed PEM text, valid while `ca` lives: the CA's certificate, the
 * leaves' private key, and host's leaf followed by the CA (NULL for a
 * host it has no leaf for). */
const char *sb_egress_ca_cert_pem(const sb_egress_ca_t *ca);
const char *sb_egress_ca_leaf_key_pem(const sb_egress_ca_t *ca);
const char *sb_egress_ca_chain_pem(const sb_egress_ca_t *ca, const char *host);

/* Fill `err` (ERR_SANDBOX) with "PREFIX: WHAT failed (OpenSSL: the first
 * queued error)" and clear OpenSSL's error queue; returns -1. */
int sb_egress_ossl_fail(err_t *err, const char *prefix, const char *what);

/* How many leaves `ca` holds (one per host given). */
size_t sb_egress_ca_leaves(const sb_egress_ca_t *ca);

#endif
