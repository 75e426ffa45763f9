/*
 * err: a caller-owned error record, so reporting a failure allocates nothing.
 *
 * Library functions take an optional `err_t *` (NULL means "don't care") and,
 * on failure, fill it and return -1 (or NULL). err_set() returns -1 so that a
 * failure is one line:   return err_set(err, ERR_KERNEL, "...", ...);
 *
 * The contract, for every function that takes an `err_t *`:
 * - The caller owns the record and starts it empty: `err_t err = {0};`.
 * - On failure the callee fills it and returns -1 or NULL. On success it
 *   leaves it untouched: it does not clear it, so read `err` only after a
 *   failure return.
 * - The last error wins: err_set() overwrites whatever was there, so a
 *   caller that fails because a callee failed either passes the callee's
 *   record up unchanged (the innermost text, the most precise), or adds
 *   its context in front with err_prefix() (code kept). It calls err_set()
 *   again only to say something truer (e.g. ERR_INTERRUPTED after Ctrl-C).
 * - A function whose NULL or 0 is not a failure (a receive that found
 *   nothing waiting) clears the record first with err_clear() and says so
 *   in its header: the caller then tells "nothing" from "failed" by
 *   err.code.
 * - The text is for a person and never holds a secret (key, token, HMAC
 *   key, a URL's user info).
 *
 * The code doubles as the process exit code chosen by main (see README
 * "Exit codes"), so it names a class of failure, not a specific error.
 */
#ifndef COMMON_ERR_H
#define COMMON_ERR_H

#include <stdarg.h>

enum err_code {
    ERR_OK = 0,
    ERR_USER_CODE = 1,    /* the user's code raised, or an error was recorded */
    ERR_USAGE = 2,        /* bad flags, bad arguments, unreadable input file */
    ERR_KERNEL = 3,       /* kernel failed to start, died, or spoke garbage */
    ERR_SANDBOX = 4,      /* the sandbox could not be set up */
    ERR_PROVIDER = 5,     /* the LLM provider failed (auth, network, limits) */
    ERR_TIMEOUT = 6,      /* an execution exceeded its time limit */
    ERR_IO = 7,           /* reading/writing a file of ours failed */
    ERR_VERIFY = 8,       /* a signature or hash did not verify */
    ERR_DIFFERS = 9,      /* archive rerun: outputs were not reproduced */
    ERR_INTERRUPTED = 130 /* the user pressed Ctrl-C (128 + SIGINT) */
};

typedef struct err {
    int code;        /* one of enum err_code; ERR_OK when nothing failed */
    char text[1024]; /* human-readable, NUL-terminated, never a secret */
} err_t;

/* Fill `err` (if non-NULL) and return -1. */
int err_set(err_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int err_vset(err_t *err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* err_set() with ": " and strerror(errno) appended, as git's error_errno:
 *     return err_errno(err, ERR_IO, "cannot open %s", path);
 * errno is read before anything else and left as it was on return. */
int err_errno(err_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with an error number the caller kept or was handed: a saved
 * errno, a negated return (libseccomp's -rc), pthread's return value.
 *     return err_errnum(err, ERR_SANDBOX, -rc, "seccomp: loading");
 * errno is left as it was. */
int err_errnum(err_t *err, int code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prefix the existing text with "prefix: " (keeps the code); returns -1. */
int err_prefix(err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void err_clear(err_t *err);

#endif
