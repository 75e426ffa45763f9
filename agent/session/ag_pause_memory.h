/*
 * ag_pause_memory: pause a session with its memory and resume it (issue 31),
 * for whatever parks sessions: the E2B server's POST /sandboxes/{id}/pause with
 * autoPauseMemory (the `persist` branch owns agent/e2b's pause and connect
 * endpoints and calls this when the session's engine is gvisor), later serve
 * and `mcp --http`.
 *
 *   ag_mem_pause_t *p = ag_session_pause_memory(s, NULL, &err); // no process
 *   ...                                                      // left
 *   ag_session_resume_memory(s, &p, &err); // the kernel answers again
 *
 * The image goes into a new 0700 directory under `state_dir` (NULL: the
 * Jupyter data dir's jupyter-agent/paused, made 0700), sealed by a random
 * key that lives only in the returned handle (wiped when it is
 * released): an image another user edited, truncated, swapped or owns is
 * refused (ERR_VERIFY) before runsc reads it. A session on the
 * namespaces engine, or a warm (pool or serve) kernel, answers ERR_USAGE
 * with the reason; a files-only pause is the caller's other choice there.
 * The kernel's variables, modules, open files and /mnt/data come back;
 * every connection to the kernel is new after the resume (the kernel's
 * own Jupyter key stays: it holds it in memory). A handle does not
 * survive our process (the key is in memory only): sessions surviving a
 * server restart need a key kept on disk; not done yet.
 */
#ifndef AGENT_SESSION_AG_PAUSE_MEMORY_H
#define AGENT_SESSION_AG_PAUSE_MEMORY_H

#include "agent/session/ag_session.h"
#include "common/err.h"

#include <stdint.h>

typedef struct ag_mem_pause ag_mem_pause_t;

/* Pause `s` with its memory: a handle, or NULL + err (ERR_USAGE: this
 * session cannot be paused so, and why; it still runs; other codes: the
 * pause failed and the kernel is gone). */
ag_mem_pause_t *ag_session_pause_memory(ag_session_t *s, const char *state_dir,
                                        err_t *err);
/* Resume `s` from *p; on success *p is released (its image removed) and
 * NULLed. -1 + err leaves *p (a refused image can be looked at). */
int ag_session_resume_memory(ag_session_t *s, ag_mem_pause_t **p, err_t *err);
/* The image directory (borrowed) and its size in bytes (for a
 * --pause-disk cap). */
const char *ag_mem_pause_dir(const ag_mem_pause_t *p);
uint64_t ag_mem_pause_bytes(const ag_mem_pause_t *p);
/* Wipe the key and remove the image: the paused state is given up. */
void ag_mem_pause_release(ag_mem_pause_t **p);

#endif
