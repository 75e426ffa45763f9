/*
 * err: a caller-owned error record, so reporting a failure allocates nothing.
 *
 * Library functions take an optional `err_t *` (NULL means "don't care") and,
 * on failure, fill it and return -1 (or NULL). err_set() returns -1 so that a
 * failure is one line:   return err_set(err, ERR_KERNEL, "...", ...);
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
/* Prefix the existing text with "prefix: " (keeps the code); returns -1. */
int err_prefix(err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void err_clear(err_t *err);

#endif
