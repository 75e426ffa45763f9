/*
 * audit: a tamper-evident, hash-chained JSON-lines log (--audit FILE,
 * docs/audit.md).
 *
 * Each record is one line, a JSON object whose members start
 *     {"seq": N, "ts": "2026-...Z", "session": ID|null, "type": "...", ...
 * and end with "prev": the SHA-256 (64 lowercase hex) of the previous
 * record's line (its bytes without the newline). The first record of a
 * file (seq 0, type "log") carries "log_id", a random id made when the
 * file was created; its prev is the SHA-256 of the genesis string
 * "jupyter-agent audit log v1\n" LOG_ID "\n". Each record is written
 * with one write(2) to an O_APPEND file and fsync'd before the append
 * returns, under flock(2) (several processes may share one file) and a
 * mutex (several threads may share one audit_log_t: the servers write one
 * log for all their sessions).
 *
 * A seal (type "seal", with --audit-key) is an Ed25519 signature over
 * "jupyter-agent audit seal v1\n" LOG_ID "\n" SEQ "\n" PREV "\n" (SEQ the
 * seal's own seq, PREV its prev: the chain head before it); verify with
 * the public key checks it.
 *
 * For the egress proxy (branch egress): a connection record is
 *     audit_connection(log, session_id, &(audit_conn_t){...}, err);
 * with the session's log and id from agent/session (ag_session_audit(),
 * ag_session_audit_id()); the record shape is in docs/audit.md. Safe from
 * any thread. A NULL log is a no-op returning 0, so callers need no test.
 */
#ifndef COMMON_AUDIT_H
#define COMMON_AUDIT_H

#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct audit_log audit_log_t;

#define AUDIT_HASH_HEX 65    /* 64 hex digits and a NUL */
#define AUDIT_SESSION_MAX 64 /* a session id's bytes, at most */
/* An execution's code is recorded whole up to this many bytes (cut at a
 * character boundary, "code_truncated": true); its hash is always of all
 * of it. */
#define AUDIT_CODE_TEXT_MAX (64 * 1024)

/* Signs a seal: a detached Ed25519 signature of msg[0..len) into sig
 * (64 bytes). 0, or -1 with err. */
typedef int (*audit_sign_fn)(void *arg, const void *msg, size_t len,
                             unsigned char sig[64], err_t *err);

typedef struct audit_signer {
    audit_sign_fn sign;
    void (*release)(void *arg); /* called when the log is done with arg */
    void *arg;
    unsigned char pub[32]; /* the raw public key, recorded in each seal */
    char key_id[17];       /* its id as `archive keygen` prints it */
} audit_signer_t;

/* Open `path` for appending (created mode 0600, O_APPEND, O_CLOEXEC,
 * O_NOFOLLOW; a symbolic link, FIFO, device, socket or directory is
 * refused with ERR_USAGE naming `flag`, e.g. "--audit"). A new or empty
 * file gets its "log" record. An existing one continues its chain: its
 * last line must be a whole record (ERR_VERIFY otherwise, naming it).
 * `signer` (copied, and its arg released, also on failure; NULL: none)
 * seals the log on audit_seal and when the last reference is closed.
 * The same file opened again in this process returns another reference
 * to the same log (one writer; the first open's signer stays). */
audit_log_t *audit_log_open(const char *path, const char *flag,
                            const audit_signer_t *signer, err_t *err);
/* Another reference; NULL stays NULL. */
audit_log_t *audit_log_ref(audit_log_t *log);
/* Drop a reference; the last one seals (with a signer, when records
 * came after the last seal) and closes. */
void audit_log_close(audit_log_t **log);
const char *audit_log_path(const audit_log_t *log);
bool audit_log_has_signer(const audit_log_t *log);

/* Append a record of `type` for `session` (NULL: none) with the members
 * of `fields` (an object, stolen; NULL: none), fsync'd before return.
 * 0, or -1 with ERR_IO. A NULL log does nothing and returns 0. */
int audit_append(audit_log_t *log, const char *session, const char *type,
                 json_t *fields, err_t *err);
/* A seal record over the chain as it stands (ERR_USAGE without a
 * signer). */
int audit_seal(audit_log_t *log, const char *session, err_t *err);

/* A new random session id (32 hex digits) into out. */
void audit_new_id(char out[33]);
/* SHA-256 of data as 64 hex digits. */
void audit_sha256_hex(const void *data, size_t len, char out[AUDIT_HASH_HEX]);
/* The members an execution record gives its code: "code_sha256",
 * "code_bytes", "code" (at most `max` bytes, e.g. AUDIT_CODE_TEXT_MAX)
 * and, when cut, "code_truncated": true. Added to `obj`. */
void audit_code_fields(json_t *obj, const char *code, size_t max);

/* One connection the egress proxy saw (type "net"). Strings borrowed;
 * NULL members are left out. */
typedef struct audit_conn {
    const char *verdict; /* "allowed" or "refused" */
    const char *kind;    /* "connect" (CONNECT, TLS) or "http" (plain) */
    const char *host;    /* as the box asked for it */
    unsigned port;
    const char *addr;   /* the address connected to (after resolving) */
    const char *rule;   /* the --allow-net rule that allowed it */
    const char *reason; /* why it was refused */
    uint64_t bytes_out; /* box -> upstream */
    uint64_t bytes_in;  /* upstream -> box */
    int64_t duration_ms;
} audit_conn_t;
int audit_connection(audit_log_t *log, const char *session,
                     const audit_conn_t *c, err_t *err);

/* ---- verifying a log (audit_verify.c) ---- */

typedef struct audit_summary {
    size_t records;
    size_t sessions;   /* distinct session ids */
    char first_ts[40]; /* ts of the first and last record */
    char last_ts[40];
    size_t seals;          /* seal records (checked when pub given) */
    size_t last_seal_line; /* 1-based line of the last seal; 0 = none */
    size_t unsealed;       /* records after the last seal */
    size_t bad_line;       /* on a break: the first broken line (1-based) */
    long long bad_seq;     /* ... its seq as the line says, or -1 */
} audit_summary_t;

/* Check the chain of the log at `path`, and with `pub` (32 raw bytes;
 * NULL: not checked) each seal's signature and key. 0 when whole; -1
 * with ERR_VERIFY naming the first broken record (line, seq, and what is
 * wrong: edited, removed, reordered, truncated mid-line, a bad seal, a
 * seal by another key), or ERR_USAGE / ERR_IO for a file that cannot be
 * read. `sum` is filled as far as the check got. */
int audit_verify(const char *path, const unsigned char *pub,
                 audit_summary_t *sum, err_t *err);

#endif
