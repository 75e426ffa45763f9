/*
 * pk_manifest: a signed list of wheels, the only way packages reach a sandbox.
 *
 * A package directory DIR holds wheels plus two files written by
 * pk_manifest_sign_dir():
 *
 *   DIR/manifest.json   {"format": "jupyter-agent-manifest/1",
 *                        "signer": "<key id>", "created": "<UTC ISO 8601>",
 *                        "files": [{"name", "version", "filename", "size",
 *                                   "sha256"}, ...]}            (sorted)
 *   DIR/manifest.sig    four lines, each "field: value":
 *                          format: jupyter-agent-signature/1
 *                          key-id: <16 hex>
 *                          public-key: ed25519:<base64>
 *                          signature: <base64 of the 64-byte Ed25519
 *                                      detached signature over the exact
 *                                      bytes of manifest.json>
 *
 * `name` is the PEP 503 normalized project name, `version` the version as
 * spelled in the wheel filename; both must agree with `filename`. Only wheels
 * ({dist}-{ver}(-{build})?-{py}-{abi}-{plat}.whl) are listed. Signing refuses
 * any other file, subdirectory or symlink in DIR (hidden dot-files are
 * ignored), so an operator never believes a stray sdist was signed.
 *
 * Verification order: the signature over manifest.json's bytes must verify
 * with a trusted key before those bytes are parsed; then every listed file is
 * opened relative to the directory fd that held manifest.json
 * (openat, O_NOFOLLOW, regular files only) and its size and SHA-256 are
 * checked on the bytes of that open fd. The fd is kept, so the installer
 * uses exactly the bytes that were checked; pk_manifest_entry_copy() copies
 * them out and re-checks the hash of what it wrote (holding an fd does not
 * stop the directory's owner from rewriting the file in place). Files in DIR
 * that the manifest does not list are never used.
 */
#ifndef PACKAGES_PK_MANIFEST_H
#define PACKAGES_PK_MANIFEST_H

#include "common/err.h"
#include "packages/pk_key.h"
#include "packages/pk_trust.h"

#include <stdbool.h>

#include <stddef.h>
#include <stdint.h>

#define PK_MANIFEST_FORMAT "jupyter-agent-manifest/1"
#define PK_MANIFEST_SIG_FORMAT "jupyter-agent-signature/1"
#define PK_MANIFEST_JSON "manifest.json"
#define PK_MANIFEST_SIG "manifest.sig"
#define PK_MANIFEST_MAX_BYTES (16u << 20) /* manifest.json size cap */
#define PK_MANIFEST_MAX_FILES 10000       /* entries cap */

/* One wheel. Strings are borrowed, valid while the manifest lives. */
typedef struct pk_manifest_entry {
    const char *name;     /* PEP 503 normalized project name */
    const char *version;  /* version as spelled in the filename */
    const char *filename; /* a plain file name (no '/'), ends in .whl */
    uint64_t size;        /* bytes */
    const char *sha256;   /* 64 lowercase hex digits */
    int fd; /* -1, or a read-only O_CLOEXEC fd on the file whose bytes
               matched size and sha256; owned by the manifest */
} pk_manifest_entry_t;

typedef struct pk_manifest pk_manifest_t;

/* --- names ------------------------------------------------------------ */

/* PEP 503: lowercase, runs of '-', '_', '.' become one '-'. New string. */
char *pk_manifest_normalize_name(const char *name);

/* Check a manifest filename is a plain name inside its directory: not
 * empty, not absolute, no '/', not "." or "..", no leading '.', no control
 * or non-ASCII bytes, at most 255 bytes. 0 or -1 (ERR_VERIFY). */
int pk_manifest_check_filename(const char *filename, err_t *err);

/* Parse a wheel filename; on success *name (normalized) and *version are
 * new strings (either pointer may be NULL). 0 or -1 (ERR_VERIFY). */
int pk_manifest_parse_wheel_filename(const char *filename, char **name,
                                     char **version, err_t *err);

/* --- parse (no signature, no files: the fuzzed path) ------------------ */

/* Parse manifest.json bytes. All entries have fd -1. Refuses malformed
 * JSON, a wrong format, unknown or missing fields, unsafe filenames, names
 * or versions that disagree with the filename, bad sizes or hashes, and
 * duplicate entries. Returns the only reference, or NULL (ERR_VERIFY). */
pk_manifest_t *pk_manifest_parse(const char *json, size_t len, err_t *err);
void pk_manifest_destroy(pk_manifest_t **p);

size_t pk_manifest_count(const pk_manifest_t *m);
/* Entry i (< count), borrowed; NULL past the end. */
const pk_manifest_entry_t *pk_manifest_entry(const pk_manifest_t *m, size_t i);
/* The "signer" and "created" fields; borrowed. */
const char *pk_manifest_signer(const pk_manifest_t *m);
const char *pk_manifest_created(const pk_manifest_t *m);
/* The trusted key that verified the signature, or NULL (parsed only). */
const pk_pubkey_t *pk_manifest_signed_by(const pk_manifest_t *m);
/* The directory it was loaded from, or NULL (parsed only). Borrowed. */
const char *pk_manifest_dir(const pk_manifest_t *m);

/* --- sign ------------------------------------------------------------- */

/* Hash every wheel in `dir`, write manifest.json and manifest.sig (each via
 * a temporary file and rename). Returns the manifest written (fds -1), or
 * NULL: ERR_USAGE for a directory that cannot be signed as it is, ERR_IO
 * for a failed write. */
pk_manifest_t *pk_manifest_sign_dir(const char *dir, const pk_seckey_t *key,
                                    err_t *err);

/* --- verify ----------------------------------------------------------- */

/* Open `dir`, check manifest.sig against `trust` over manifest.json's exact
 * bytes, and parse them. Files are not checked yet (all fds -1). NULL on
 * failure: ERR_USAGE if `dir` is not a directory, ERR_VERIFY otherwise. */
pk_manifest_t *pk_manifest_load_signed(const char *dir, const pk_trust_t *trust,
                                       err_t *err);

/* Open entry i relative to the manifest's directory fd (O_NOFOLLOW, regular
 * file), check size and SHA-256 of the opened fd's bytes, and keep the fd
 * in the entry. 0, or -1 with ERR_VERIFY naming the file and package. */
int pk_manifest_verify_entry(pk_manifest_t *m, size_t i, err_t *err);

/* load_signed + verify_entry for every entry: the installer's entry point.
 * On success every entry has an open fd. NULL on the first failure. */
pk_manifest_t *pk_manifest_load_verified(const char *dir,
                                         const pk_trust_t *trust, err_t *err);

/* --- use -------------------------------------------------------------- */

/* Find the entries a requirement names: "name" (every version and build of
 * the project) or "name==version" (name compared after PEP 503
 * normalization, version case-insensitively). Stores up to `max` matches in
 * out[] (in manifest order) and returns how many matched (may exceed max).
 * Anything else (no match, other specifiers, extras, markers) returns -1
 * with ERR_USAGE and a message listing what the manifest offers. */
int pk_manifest_resolve(const pk_manifest_t *m, const char *requirement,
                        const pk_manifest_entry_t **out, size_t max,
                        err_t *err);

/* The highest version (PEP 440 order) of project `norm` (PEP 503
 * normalized) that satisfies `specifier` (PEP 440, e.g. ">=1.0,<2"; NULL
 * or "" for any), borrowed from the manifest; NULL if none. *listed (may
 * be NULL) says whether the project is in the manifest at all. This and
 * pk_manifest_resolve are the only places releases are chosen. */
const char *pk_manifest_best(const pk_manifest_t *m, const char *norm,
                             const char *specifier, bool *listed);

/* "a 1.0, b 2.0 and 3 more" over the distinct releases (of project
 * `only` when non-NULL; "nothing" when none), for messages. New string. */
char *pk_manifest_available(const pk_manifest_t *m, const char *only);

/* A pip requirements file pinning `entries` (e.g. from resolve): one line
 * "name==version --hash=sha256:HEX [--hash=...]" per name/version, every
 * wheel of that release contributing its hash, for
 * `pip install --no-index --require-hashes -r FILE`. New string. */
char *pk_manifest_requirements_txt(const pk_manifest_entry_t *const *entries,
                                   size_t n);

/* Copy a verified entry's bytes (read with pread from its fd) to a new file
 * `entry->filename` under `dst_dirfd` (O_CREAT|O_EXCL|O_NOFOLLOW, mode
 * 0444), hashing what is written; if the hash or size differs from the
 * manifest the copy is removed and -1 (ERR_VERIFY) returned. */
int pk_manifest_entry_copy(const pk_manifest_entry_t *entry, int dst_dirfd,
                           err_t *err);

#endif
