/*
 * ag_pty: a pty of our own between a sandboxed command and the user's
 * terminal (`jupyter-agent sandbox`).
 *
 * Handed the user's terminal as stdin, stdout or stderr, a command could
 * change that terminal for good: its line discipline (TIOCSETD N_NULL
 * loses all further I/O; the seccomp filter refuses that one), its modes
 * (tcsetattr: no echo, output suspended with TCOOFF), its window size,
 * and anything else an fd of a terminal allows. So the box gets the slave
 * of a pty made here for every stdio fd that is a terminal; we copy bytes
 * between its master and the user's terminal, which is in raw mode while
 * the command runs (the pty's own line discipline, which the command may
 * change as it likes, does the editing and turns ^C into SIGINT) and is
 * restored exactly as it was at the end.
 *
 * Single-threaded; the caller polls.
 */
#ifndef AGENT_CLI_AG_PTY_H
#define AGENT_CLI_AG_PTY_H

#include "common/err.h"

#include <poll.h>
#include <stdbool.h>

typedef struct ag_pty ag_pty_t;

/* A pty for the terminals among fds 0, 1 and 2, with their modes and
 * window size. NULL without err->code when none is a terminal; NULL with
 * ERR_SANDBOX when no pty can be made. */
ag_pty_t *ag_pty_new(err_t *err);
/* Restore the user's terminal (when ag_pty_start changed it) and close
 * everything. Accepts NULL; sets *p to NULL. */
void ag_pty_destroy(ag_pty_t **p);

/* The fd the command gets as its stdio fd `i` (0..2): the pty's slave
 * when fd i is a terminal, else i itself. Borrowed. */
int ag_pty_stdio(const ag_pty_t *p, int i);
/* True when stdin is a terminal: the slave is the command's stdin, and
 * its controlling terminal (sb_sandbox_set_stdin_ctty). */
bool ag_pty_has_stdin(const ag_pty_t *p);

/* After the command started: close our copy of the slave and put the
 * user's terminal (stdin) in raw mode. */
void ag_pty_start(ag_pty_t *p);
/* Add what to poll to pf[*n] (at most 2 entries). */
void ag_pty_poll_setup(ag_pty_t *p, struct pollfd *pf, int *n);
/* After poll(): copy what is ready. pf and n as given to poll_setup's
 * caller (entries it added are found by fd). */
void ag_pty_poll_done(ag_pty_t *p, const struct pollfd *pf, int n);
/* The user's terminal was resized (SIGWINCH): pass the size on. */
void ag_pty_winch(ag_pty_t *p);
/* The command ended: copy out what it left in the pty. */
void ag_pty_drain(ag_pty_t *p);

#endif
