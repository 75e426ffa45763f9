/*
 * sb_cmds: the commands of one running box, on any sb_proc.h engine: what
 * E2B's process.Process service and MCP's shell tool use.
 *
 * Each command gets pipes for stdin, stdout and stderr; one thread per
 * manager reads the output into a per-command log (stdout and stderr
 * records in the order read) that any number of readers follow with
 * their own cursor, so a command started in one request is waited for,
 * streamed or reconnected to from another. Bounds, for every command:
 *   - output: at most limits.max_output bytes of stdout + stderr; the
 *     byte that would pass it kills the command's process group
 *     (SIGKILL), and its end says "output limit";
 *   - time: its timeout (at most limits.max_timeout_ms, the operator's;
 *     0 asks for exactly that), then SIGKILL of the group, "timed out";
 *   - count: SB_CMD_MAX alive per box (sb_sandbox_impl.h) and the box's
 *     pids limit; limits.max_kept finished ones are remembered for late
 *     readers, oldest forgotten first.
 * A command ends when its process exited and its pipes are closed, or
 * SB_CMDS_GRACE_MS after it exited if something it started holds them.
 * Everything dies with the box (the engine's promise); the manager then
 * reports every command as ended ("the box ended").
 *
 * Thread-safe: every function may be called from any thread.
 */
#ifndef SANDBOX_SB_CMDS_H
#define SANDBOX_SB_CMDS_H

#include "common/err.h"
#include "sandbox/sb_proc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define SB_CMDS_GRACE_MS 200
#define SB_CMDS_DEFAULT_OUTPUT ((size_t)4 << 20)

typedef struct sb_cmds sb_cmds_t;

typedef struct sb_cmds_limits {
    size_t max_output;  /* bytes per command; 0 = SB_CMDS_DEFAULT_OUTPUT */
    int max_timeout_ms; /* the operator's bound; 0 = none */
    unsigned max_kept;  /* finished commands remembered; 0 = 16 */
} sb_cmds_limits_t;

/* Take `engine` (stolen, *engine set to NULL) and start the reader
 * thread. NULL + err on failure (the engine is then destroyed). */
sb_cmds_t *sb_cmds_new(sb_proc_engine_t **engine, const sb_cmds_limits_t *lim,
                       err_t *err);
/* Kill every live command (SIGKILL to its group), stop the thread, free.
 * Accepts NULL; sets *p to NULL. */
void sb_cmds_destroy(sb_cmds_t **p);
/* False once the box has gone: start a new manager on the new box. */
bool sb_cmds_alive(sb_cmds_t *m);

typedef struct sb_cmd_opts {
    char *const *argv; /* the program and its arguments (see sb_proc.h) */
    char *const *envp; /* the complete environment */
    const char *cwd;   /* NULL = /home/user */
    const char *tag;   /* a caller's name for it (listed), or NULL */
    int timeout_ms;    /* 0 = limits.max_timeout_ms (or none) */
    size_t max_output; /* 0 or more than limits.max_output = that */
    bool stdin_open;   /* keep stdin open for sb_cmds_write (else EOF) */
    /* A terminal instead of pipes when cols and rows are not 0: a pty pair
     * made on the host, its slave the command's stdin, stdout, stderr and
     * controlling terminal; sb_cmds_write types into it, its output is
     * one stream (SB_CMDS_PTY), sb_cmds_resize changes its size. */
    unsigned short pty_cols, pty_rows;
} sb_cmd_opts_t;

/* Start a command and wait until it runs (or failed to): 0 with *id (the
 * manager's, never reused) and *pid (inside the box), or -1 + err
 * (ERR_USAGE: no such program, bad cwd; ERR_SANDBOX: the box). */
int sb_cmds_start(sb_cmds_t *m, const sb_cmd_opts_t *o, unsigned *id, int *pid,
                  err_t *err);

/* The id of the live or remembered command with pid `pid` (or `tag`,
 * non-NULL), or 0. */
unsigned sb_cmds_find(sb_cmds_t *m, int pid, const char *tag);
/* Signal the command's process group; ERR_USAGE if it is not running. */
int sb_cmds_signal(sb_cmds_t *m, unsigned id, int sig, err_t *err);
/* Write all of `data` to its stdin (waits up to 5 s for room). */
int sb_cmds_write(sb_cmds_t *m, unsigned id, const void *data, size_t len,
                  err_t *err);
int sb_cmds_close_stdin(sb_cmds_t *m, unsigned id, err_t *err);

/* The stream number of a terminal command's output. */
#define SB_CMDS_PTY 3

/* Set a terminal command's window size (ERR_USAGE: not a terminal, or
 * not running). */
int sb_cmds_resize(sb_cmds_t *m, unsigned id, unsigned short cols,
                   unsigned short rows, err_t *err);

/* The commands still running: [{id, pid, tag, argv, cwd}] (new ref). */
json_t *sb_cmds_list(sb_cmds_t *m);

typedef struct sb_cmd_end {
    int exit_code;  /* shell-style: code, or 128 + signal; -1 if unknown */
    int signal;     /* the signal that ended it, or 0 */
    bool timed_out; /* killed at its timeout */
    bool capped;    /* killed at its output limit */
    bool box_gone;  /* the box ended under it */
    char why[160];  /* "exited with status 1", "timed out after 5 s ..." */
} sb_cmd_end_t;

enum sb_cmds_next_result {
    SB_CMDS_UNKNOWN = -1, /* no such id (or forgotten) */
    SB_CMDS_WAIT = 0,     /* nothing new within timeout_ms */
    SB_CMDS_DATA = 1,     /* *stream (1 stdout, 2 stderr, SB_CMDS_PTY),
                           *data, *len */
    SB_CMDS_END = 2       /* no more output: *end says how it ended */
};

/* Follow command `id` from *cursor (0 = its first output; the value
 * sb_cmds_start's caller or the last call left): waits up to timeout_ms
 * (< 0: forever) for the next record or the end. DATA gives a new
 * buffer (*data, caller frees) and advances *cursor. `end` may be NULL. */
int sb_cmds_next(sb_cmds_t *m, unsigned id, size_t *cursor, int timeout_ms,
                 int *stream, char **data, size_t *len, sb_cmd_end_t *end);
/* The cursor just past everything read so far (to follow only what comes
 * next, as a reconnecting client does). */
size_t sb_cmds_cursor_now(sb_cmds_t *m, unsigned id);
/* Forget a finished command (its log is freed). */
void sb_cmds_forget(sb_cmds_t *m, unsigned id);

#endif
