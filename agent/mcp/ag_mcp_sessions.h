/*
 * ag_mcp_sessions: the MCP sessions of the HTTP transport, by
 * MCP-Session-Id. Each id is 128 random bits in hex (libsodium). A session
 * is used by one request at a time (ag_mcp_sessions_acquire waits for the
 * one before); it ends when the client sends DELETE, when it was idle
 * longer than idle_ms, or lived longer than lifetime_ms (checked by
 * ag_mcp_sessions_expire), or when the table is destroyed. An ended
 * session is gone for good: its id is answered 404 and its kernel and
 * sandbox are destroyed once no request uses it any more.
 *
 * Each session runs its requests on a thread of its own
 * (ag_mcp_session_handle), which destroys the session's server at the end:
 * ending a session does not wait for its kernel to die (the thread kills
 * it, waits for it and removes its box afterwards); destroying the table
 * waits until every ended session's box is gone. Thread-safe.
 */
#ifndef AGENT_MCP_AG_MCP_SESSIONS_H
#define AGENT_MCP_AG_MCP_SESSIONS_H

#include "agent/mcp/ag_mcp_server.h"

#include <stdbool.h>
#include <stdint.h>

#define AG_MCP_SESSION_ID_LEN 32 /* hex characters */

typedef struct ag_mcp_sessions ag_mcp_sessions_t;
typedef struct ag_mcp_session ag_mcp_session_t;

ag_mcp_sessions_t *ag_mcp_sessions_new(int max, int idle_ms, int lifetime_ms);
/* End every session: running requests are cancelled, and each session is
 * destroyed when the last request using it lets go. */
void ag_mcp_sessions_end_all(ag_mcp_sessions_t *t);
/* ag_mcp_sessions_end_all, wait until every ended session's box was
 * removed, then free the table: no request may still use it (stop the
 * HTTP daemon first). */
void ag_mcp_sessions_destroy(ag_mcp_sessions_t **p);

/* Add `*server` (stolen, *server = NULL) as a new session and acquire it;
 * NULL (server destroyed) when max sessions already exist, counting ended
 * ones whose box is still being removed (waited for up to 10 s). */
ag_mcp_session_t *ag_mcp_sessions_add(ag_mcp_sessions_t *t,
                                      ag_mcp_server_t **server);
/* The live session `id`, acquired (for the caller's exclusive use until
 * ag_mcp_sessions_release), or NULL if there is none. `exclusive` false
 * takes a reference without waiting for the running request (for
 * cancellations). */
ag_mcp_session_t *ag_mcp_sessions_acquire(ag_mcp_sessions_t *t, const char *id,
                                          bool exclusive);
void ag_mcp_sessions_release(ag_mcp_sessions_t *t, ag_mcp_session_t *s,
                             bool exclusive);
/* End session `id` (its running request is cancelled). 0, or -1 if none. */
int ag_mcp_sessions_end(ag_mcp_sessions_t *t, const char *id);
/* End the sessions past their idle time or lifetime; returns how many. */
int ag_mcp_sessions_expire(ag_mcp_sessions_t *t);
/* Live sessions. */
int ag_mcp_sessions_count(ag_mcp_sessions_t *t);

/* Handle `msg` (borrowed) on the session's own thread and wait for the
 * response (as ag_mcp_server_handle). The caller holds the session
 * exclusively. Each session has one thread for its life: sandboxes die
 * with the thread that spawned them, so kernels must not be started from
 * a connection's thread. */
json_t *ag_mcp_session_handle(ag_mcp_session_t *s, const json_t *msg,
                              const ag_mcp_io_t *io);

ag_mcp_server_t *ag_mcp_session_server(ag_mcp_session_t *s); /* borrowed */
const char *ag_mcp_session_id(const ag_mcp_session_t *s);

#endif
