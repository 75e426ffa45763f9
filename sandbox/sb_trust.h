/*
 * sb_trust: the set of public keys whose manifest signatures are accepted.
 *
 * Keys come from --trust arguments (a key string or a .pub file) and from a
 * trusted-keys directory of *.pub files: $JUPYTER_AGENT_TRUSTED_KEYS when set
 * (and only it), else ~/.config/jupyter-agent/trusted-keys/ and
 * /etc/jupyter-agent/trusted-keys/. Missing directories are fine; a malformed
 * .pub file, or a world-writable key file or directory, is refused so that a
 * broken trust configuration never passes silently.
 *
 * Several keys may be trusted at once (key rotation): a signature is accepted
 * if any of them verifies it. A key added twice is kept once (first origin).
 */
#ifndef SANDBOX_SB_TRUST_H
#define SANDBOX_SB_TRUST_H

#include "common/err.h"
#include "sandbox/sb_key.h"

#include <stddef.h>

typedef struct sb_trust sb_trust_t;

/* An empty set; the only reference. */
sb_trust_t *sb_trust_new(void);
void sb_trust_destroy(sb_trust_t **p);

/* Add a key string "ed25519:<base64> [LABEL]"; `origin` says where it came
 * from in messages (copied). 0 or -1 (ERR_USAGE). */
int sb_trust_add_key(sb_trust_t *t, const char *text, const char *origin,
                     err_t *err);
/* Add the key in a .pub file. 0 or -1 (ERR_USAGE). */
int sb_trust_add_file(sb_trust_t *t, const char *path, err_t *err);
/* A --trust argument: a key string if it starts with "ed25519:", else a
 * path to a .pub file. */
int sb_trust_add_arg(sb_trust_t *t, const char *arg, err_t *err);
/* Every *.pub file in `dir` (sorted by name). A missing directory adds
 * nothing and returns 0. */
int sb_trust_add_dir(sb_trust_t *t, const char *dir, err_t *err);
/* The default directories described above. */
int sb_trust_add_defaults(sb_trust_t *t, err_t *err);

size_t sb_trust_count(const sb_trust_t *t);
/* Key i (< count); borrowed, valid while `t` lives and is not added to. */
const sb_pubkey_t *sb_trust_key(const sb_trust_t *t, size_t i);
/* Where key i came from: "--trust", a file path; borrowed. */
const char *sb_trust_origin(const sb_trust_t *t, size_t i);
/* The trusted key equal to `pk`, or NULL. Borrowed. */
const sb_pubkey_t *sb_trust_find(const sb_trust_t *t,
                                 const unsigned char pk[SB_KEY_PUBLIC_BYTES]);
/* "id (label, origin), ..." or "none"; new string, caller frees. */
char *sb_trust_describe(const sb_trust_t *t);

#endif
