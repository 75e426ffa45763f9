/*
 * ag_pause: stop a session and start it again later with what could be
 * kept. The one seam every door (the E2B server's pause and connect; later
 * serve's named sessions) goes through, so that a memory pause can come in
 * here when an engine supports it.
 *
 * Files only (every engine, today): pause copies /mnt/data (= /home/user
 * under E2B) into a directory of ours, 0700, under the agent's state
 * directory, with the copy rules (regular files and directories only, no
 * links followed, the workspace's --disk size at most), then ends the
 * session: the kernel is killed and the box, cgroup and run dir removed, so
 * nothing runs while paused. Resume starts a new session with the same
 * options, copies the files back as the box user and removes the copy: the
 * files are there, the kernel is fresh (variables and imports are gone).
 *
 * Memory (a checkpoint of the whole box) is the gvisor engine's, through
 * ag_pause_memory.h, which keeps the session; the namespaces engine cannot
 * checkpoint, and ag_pause_check says so ("memory pause needs --engine
 * gvisor") and offers the files-only kind.
 */
#ifndef AGENT_SESSION_AG_PAUSE_H
#define AGENT_SESSION_AG_PAUSE_H

#include "agent/session/ag_session.h"
#include "common/err.h"
#include "sandbox/sb_policy.h"

#include <stdbool.h>

/* Can a session under `p` be paused this way (memory: the kernel's state
 * kept, the gvisor engine only; else files only)? 0, or -1 with ERR_USAGE
 * saying why not and what to do instead. */
int ag_pause_check(const sb_policy_t *p, bool memory, err_t *err);

/* The directory paused sessions of `door` ("e2b") are kept in, created
 * 0700 and checked (a directory of ours, not a link, not open to others):
 * $JUPYTER_AGENT_STATE_DIR, else $XDG_STATE_HOME/jupyter-agent, else
 * HOME/.local/state/jupyter-agent, then /paused-DOOR. New string, or NULL +
 * err (ERR_IO). */
char *ag_pause_dir(const char *door, err_t *err);

/* Pause *s (a sandboxed session running under policy `p`) into `dir`,
 * files only (memory true is refused: see ag_pause_memory.h), `dir` must
 * not exist (it is made 0700). On success *s is NULL (the session ended)
 * and *memory_kept is false. On failure -1 + err: *s still runs and `dir` is
 * gone. */
int ag_session_pause(ag_session_t **s, const sb_policy_t *p, const char *dir,
                     bool memory, bool *memory_kept, err_t *err);

/* A new session from `o` holding the files paused in `dir` (from
 * ag_session_pause), which is removed once they are in. *memory_kept: the
 * kernel's memory came back (false for now: a fresh kernel). NULL + err
 * (the start's error, or the copy's: ERR_IO); `dir` is kept then, so a
 * later resume can try again. */
ag_session_t *ag_session_resume(const ag_session_opts_t *o, const char *dir,
                                bool *memory_kept, err_t *err);

#endif
