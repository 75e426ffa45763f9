/*
 * pk_trust: the set of public keys whose manifest signatures are accepted.
 *
 * Keys come from --trust arguments (a key string or a .pub file) and from a
 * trusted-keys directory of *.pub files: $JUPYTER_AGENT_TRUSTED_KEYS when set
 * (and only it), else ~/.config/jupyter-agent/trusted-keys/ and
 * /etc/jupyter-agent/trusted-keys/. Missing directories are fine; a malformed
 * .pub file is refused, and so is a key file or directory that someone else
 * could write: owned by neither root nor the user running us, or group- or
 * world-writable (sticky or not: a sticky directory still lets anyone add a
 * file). Key files are opened O_NOFOLLOW (from the directory's fd for a
 * directory's keys), so a symlink is refused too. A broken trust
 * configuration never passes silently.
 *
 * Several keys may be trusted at once (key rotation): a signature is accepted
 * if any of them verifies it. A key added twice is kept once (first origin).
 */
#ifndef PACKAGES_PK_TRUST_H
#define PACKAGES_PK_TRUST_H

#include "common/err.h"
#include "packages/pk_key.h"

#include <stddef.h>

typedef struct pk_trust pk_trust_t;

/* An empty set; the only reference. */
pk_trust_t *pk_trust_new(void);
void pk_trust_destroy(pk_trust_t **p);

/* Add a key string "ed25519:<base64> [LABEL]"; `origin` says where it came
 * from in messages (copied). 0 or -1 (ERR_USAGE). */
int pk_trust_add_key(pk_trust_t *t, const char *text, const char *origin,
                     err_t *err);
/* Add the key in a .pub file. 0 or -1 (ERR_USAGE). */
int pk_trust_add_file(pk_trust_t *t, const char *path, err_t *err);
/* A --trust argument: a key string if it starts with "ed25519:", else a
 * path to a .pub file. */
int pk_trust_add_arg(pk_trust_t *t, const char *arg, err_t *err);
/* Every *.pub file in `dir` (sorted by name). A missing directory adds
 * nothing and returns 0. */
int pk_trust_add_dir(pk_trust_t *t, const char *dir, err_t *err);
/* The default directories described above. */
int pk_trust_add_defaults(pk_trust_t *t, err_t *err);

size_t pk_trust_count(const pk_trust_t *t);
/* Key i (< count); borrowed, valid while `t` lives and is not added to. */
const pk_pubkey_t *pk_trust_key(const pk_trust_t *t, size_t i);
/* Where key i came from: "--trust", a file path; borrowed. */
const char *pk_trust_origin(const pk_trust_t *t, size_t i);
/* The trusted key equal to `pk`, or NULL. Borrowed. */
const pk_pubkey_t *pk_trust_find(const pk_trust_t *t,
                                 const unsigned char pk[PK_KEY_PUBLIC_BYTES]);
/* "id (label, origin), ..." or "none"; new string, caller frees. */
char *pk_trust_describe(const pk_trust_t *t);

#endif
