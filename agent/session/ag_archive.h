/*
 * ag_archive: reproducible report archives, packed from a session's
 * notebook and checked before anything in them is trusted.
 *
 * An archive is one zip file:
 *   report.ipynb              the notebook
 *   inputs/NAME               the files the session was given (--file),
 *                             found through metadata.jupyter_agent.inputs
 *   outputs/...               the session's SESSION_files/ folder
 *   packages/NAME             the signed wheel directory, when one was used
 *   environment.json          agent version, kernelspec, sandbox policy,
 *                             model and provider (never a key), and the
 *                             kernel's environment lock (ag_envlock)
 *   ro-crate-metadata.json    RO-Crate 1.1, Process Run Crate profile
 *   manifest-sha256.txt       "SHA256  NAME" for every file above
 *   provenance.json           a DSSE envelope (Ed25519, pk_key) over an
 *                             in-toto Statement v1 naming every file but
 *                             itself with its SHA-256
 * Verification trusts nothing in the archive until the signature of a
 * trusted key covers the statement and every file's hash matches it:
 * nothing missing, nothing extra (nb_archive's extraction rules too).
 */
#ifndef AGENT_SESSION_AG_ARCHIVE_H
#define AGENT_SESSION_AG_ARCHIVE_H

#include "agent/session/ag_session.h"
#include "common/cliopt.h"
#include "common/err.h"
#include "notebook-io/nb_archive.h"
#include "notebook-io/nb_notebook.h"
#include "packages/pk_key.h"
#include "packages/pk_trust.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#define AG_ARCHIVE_NOTEBOOK "report.ipynb"
#define AG_ARCHIVE_ENVIRONMENT "environment.json"
#define AG_ARCHIVE_CRATE "ro-crate-metadata.json"
#define AG_ARCHIVE_MANIFEST "manifest-sha256.txt"
#define AG_ARCHIVE_PROVENANCE "provenance.json"

typedef struct ag_archive_pack_opts {
    const char *notebook_path; /* the notebook on disk (required) */
    const nb_notebook_t *nb;   /* its content, or NULL to read the file */
    const char *out_path;      /* the archive to write (required) */
    char **inputs;             /* borrowed NULL-terminated --input PATH[:NAME]
                                  list: added, or replacing a recorded input
                                  of the same NAME */
    const char *outputs_dir;   /* NULL: NOTEBOOK_files/ when it exists */
    const char *packages_dir;  /* NULL: none */
    const char *key_path;      /* secret key to sign with, or NULL */
    const json_t *envlock;     /* borrowed ag_envlock result, or NULL */
    bool force;                /* replace an existing archive */
} ag_archive_pack_opts_t;

/* Pack. Recorded inputs are re-hashed and must still match the hash the
 * session recorded (else ERR_VERIFY naming the file; pass --input to give
 * the right one). Fills *nfiles_out (may be NULL). 0, or -1 with err set;
 * no archive is left behind on failure. */
int ag_archive_pack(const ag_archive_pack_opts_t *o, size_t *nfiles_out,
                    err_t *err);

/* `ask --archive` and `run --archive`: pack the notebook just written at
 * `nb_path` (with NOTEBOOK_files/ when it exists), reading the environment
 * lock from the session's own kernel while it is alive. `session` is
 * borrowed; `key_path` may be NULL (unsigned). 0, or -1 with err set. */
int ag_archive_session(ag_session_t *session, const char *nb_path,
                       const char *archive_path, const char *key_path,
                       err_t *err);

/* --archive ZIP and --archive-key KEY, which `ask` and `run` take to call
 * ag_archive_session (both borrowed from argv). */
typedef struct ag_archive_flags {
    const char *path; /* --archive ZIP, or NULL: no archive */
    const char *key;  /* --archive-key KEY, or NULL: unsigned */
} ag_archive_flags_t;

/* Their flag group ("report archive", common/cliopt.h) over `f`. */
cliopt_group_t ag_archive_flags(ag_archive_flags_t *f);

/* A verified archive. */
typedef struct ag_archive {
    nb_archive_t *files;       /* owned contents and hashes */
    json_t *statement;         /* owned in-toto statement */
    json_t *environment;       /* owned environment.json */
    nb_notebook_t *nb;         /* owned report.ipynb */
    bool is_signed;            /* false only with allow_unsigned */
    pk_pubkey_t signer;        /* when signed: the trusted key that signed */
    const char *signer_origin; /* borrowed from the trust set, or NULL */
} ag_archive_t;

/* Read and verify `path` (and extract into `extract_dirfd` when >= 0, an
 * empty directory the caller made). `trust` is borrowed. NULL with err set
 * (ERR_VERIFY naming the file for any integrity failure). */
ag_archive_t *ag_archive_open(const char *path, int extract_dirfd,
                              const pk_trust_t *trust, bool allow_unsigned,
                              err_t *err);
void ag_archive_destroy(ag_archive_t **p);

#endif
