/*
 * pk_key: Ed25519 keys for signed package manifests (libsodium crypto_sign).
 *
 * Text formats (one line each, so a public key pastes into --trust):
 *   public key   "ed25519:<base64 of 32 bytes> [LABEL]"      (KEY.pub)
 *   secret key   "ed25519-secret:<base64 of 64 bytes> [LABEL]" (KEY, 0600)
 * Base64 is the standard alphabet with padding. LABEL is optional, at most
 * PK_KEY_LABEL_MAX bytes of [A-Za-z0-9._@+-].
 *
 * A key id is the first 8 bytes of SHA-256 of the raw 32-byte public key, as
 * 16 lowercase hex digits. It names a key in messages; trust is always decided
 * on the full public key, never on the id.
 *
 * The secret half lives only in sodium_malloc'd memory inside pk_seckey_t and
 * is never formatted for output by this module except into the key file.
 */
#ifndef PACKAGES_PK_KEY_H
#define PACKAGES_PK_KEY_H

#include "common/err.h"

#include <stddef.h>

#define PK_KEY_PUBLIC_BYTES 32
#define PK_KEY_SIG_BYTES 64
#define PK_KEY_ID_HEX 16
#define PK_KEY_LABEL_MAX 64

/* A public key with its id and label. Plain data: callers embed or copy it. */
typedef struct pk_pubkey {
    unsigned char pk[PK_KEY_PUBLIC_BYTES]; /* raw Ed25519 public key */
    char id[PK_KEY_ID_HEX + 1];            /* key id, NUL-terminated hex */
    char label[PK_KEY_LABEL_MAX + 1];      /* "" when the key has none */
} pk_pubkey_t;

/* An Ed25519 secret key (with its public half). Opaque; owns guarded memory. */
typedef struct pk_seckey pk_seckey_t;

/* Initialise libsodium once; 0 or -1 (ERR_IO) if it cannot start. */
int pk_key_sodium_init(err_t *err);

/* 1 if `label` is a valid key label (may be empty), else 0. */
int pk_key_label_ok(const char *label);

/*
 * Parse "ed25519:<base64> [LABEL]" (surrounding whitespace and a trailing
 * newline allowed) into *out. Returns 0, or -1 with ERR_USAGE.
 */
int pk_pubkey_parse(pk_pubkey_t *out, const char *text, err_t *err);

/* Fill out->id from out->pk. */
void pk_pubkey_set_id(pk_pubkey_t *out);

/* "ed25519:<base64>" without the label; new string, caller frees. */
char *pk_pubkey_format(const pk_pubkey_t *key);

/*
 * Create a new key pair: `path` (secret, mode 0600) and `path`.pub (0644).
 * Refuses (ERR_USAGE) if either file exists; never overwrites. On success
 * fills *pub_out (may be NULL) and returns 0; on failure leaves no file
 * behind and returns -1.
 */
int pk_key_generate(const char *path, const char *label, pk_pubkey_t *pub_out,
                    err_t *err);

/*
 * Load a secret key file. Refuses (ERR_USAGE) a file readable or writable
 * by group or others, a malformed file, or one whose two halves disagree.
 * Returns the only reference, or NULL.
 */
pk_seckey_t *pk_seckey_load(const char *path, err_t *err);
void pk_seckey_destroy(pk_seckey_t **p);

/* The public half; borrowed, valid while `key` lives. */
const pk_pubkey_t *pk_seckey_public(const pk_seckey_t *key);

/* Detached Ed25519 signature over msg[0..len). Returns 0 or -1. */
int pk_seckey_sign(const pk_seckey_t *key, const void *msg, size_t len,
                   unsigned char sig[PK_KEY_SIG_BYTES], err_t *err);

/* 1 if `sig` is a valid signature of msg by `key`, else 0. */
int pk_pubkey_verify(const pk_pubkey_t *key, const void *msg, size_t len,
                     const unsigned char sig[PK_KEY_SIG_BYTES]);

#endif
