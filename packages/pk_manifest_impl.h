/*
 * pk_manifest_impl: what pk_manifest.c (the model, parsing, names,
 * resolution) and pk_manifest_sign.c (signing and verifying a directory)
 * share. Private to those two files.
 */
#ifndef PACKAGES_PK_MANIFEST_IMPL_H
#define PACKAGES_PK_MANIFEST_IMPL_H

#include "packages/pk_manifest.h"

#include <sodium.h>
#include <stddef.h>

#define SIG_FILE_MAX 4096
#define HASH_HEX (crypto_hash_sha256_BYTES * 2)
#define IO_CHUNK 65536

struct pk_manifest {
    pk_manifest_entry_t *entries; /* owned array of n; strings owned too */
    size_t n;                     /* entries in use */
    char *signer;                 /* owned "signer" field */
    char *created;                /* owned "created" field */
    char *dir;                    /* owned path it was loaded from, or NULL */
    int dirfd;             /* -1, or the O_DIRECTORY fd entries open under */
    int has_signer;        /* 1 when signed_by is set */
    pk_pubkey_t signed_by; /* the trusted key that verified the signature */
};

/* An empty manifest (dirfd -1); free with pk_manifest_destroy. */
pk_manifest_t *pk_manifest_alloc(void);
/* Copy untrusted text into out[cap] for a message: printable ASCII only,
 * others as '?', cut at 80 bytes with "...". Returns out. */
const char *pk_manifest_quote(const char *s, char *out, size_t cap);
/* Refuse two entries with the same wheel identity (ERR_VERIFY). */
int pk_manifest_check_duplicates(const pk_manifest_t *m, err_t *err);

#endif
