/*
 * ag_mcp_http: the MCP Streamable HTTP transport, on agent/http's
 * ag_httpd (one event loop; requests on up to 128 workers, 128 more
 * queued, 503 beyond; at most 8 in progress for one session, a
 * cancellation excepted). One endpoint, /mcp:
 *
 *   POST    one JSON-RPC message (or a batch in 2025-03-26), at most
 *           AG_MCP_MAX_MESSAGE bytes (413 beyond). Requests are answered
 *           with application/json, or with a text/event-stream when the
 *           client accepts one and the call asked for progress (the
 *           progress notifications, then the response). Notifications and
 *           responses: 202 with no body.
 *   GET     405 (no server-initiated stream).
 *   DELETE  ends the session: its kernel and sandbox are destroyed.
 *
 * Sessions: initialize (without MCP-Session-Id) creates one and returns
 * its id in MCP-Session-Id; every other request must carry it (400
 * without, 404 once the session ended or for an id never issued). At most
 * max_sessions live at once (503 beyond); idle ones and old ones end as
 * --idle-timeout and --max-lifetime say. MCP-Protocol-Version, when sent,
 * must be a revision we speak (400).
 *
 * Defence: binds 127.0.0.1 unless told otherwise; any non-loopback
 * address needs a bearer token (token_file), kept and compared as its
 * SHA-256 digest (401 without it); a browser Origin must be
 * localhost/127.0.0.1 or one of `origins` (403). The connection bounds
 * (header and request deadlines, incomplete connections per address,
 * the connection cap) are ag_httpd's.
 */
#ifndef AGENT_MCP_AG_MCP_HTTP_H
#define AGENT_MCP_AG_MCP_HTTP_H

#include "agent/mcp/ag_mcp_tools.h"
#include "common/err.h"

#include <signal.h>
#include <stdbool.h>

#define AG_MCP_HTTP_MAX_ORIGINS 16

typedef struct ag_mcp_http_opts {
    const char *listen;     /* "[ADDR:]PORT"; PORT 0 picks a free one */
    const char *token_file; /* bearer token file, or NULL */
    const char *origins[AG_MCP_HTTP_MAX_ORIGINS]; /* extra allowed Origins */
    int norigins;                                 /* entries in origins */
    int max_sessions;                             /* live sessions at once */
} ag_mcp_http_opts_t;

/* The bearer token as the server keeps it: its SHA-256 digest and
 * nothing else, so no check can compare lengths (or bytes) first. */
typedef struct ag_mcp_token {
    unsigned char sha256[32];
} ag_mcp_token_t;

void ag_mcp_token_set(ag_mcp_token_t *t, const char *token);
/* Does the Authorization header value `auth` (may be NULL) carry the
 * token as "Bearer TOKEN"? Whatever arrives is hashed and the two
 * digests compared in constant time. */
bool ag_mcp_token_ok(const ag_mcp_token_t *t, const char *auth);

/* Serve until *stop becomes non-zero. Logs "mcp: listening on
 * http://ADDR:PORT/mcp" (at level info, and always on stderr) once bound.
 * Returns 0 after a clean stop (every session ended), or -1 + err:
 * ERR_USAGE (bad address, a non-loopback address without a token, an
 * unreadable or short token file), ERR_IO (the port could not be bound). */
int ag_mcp_http_run(const ag_mcp_config_t *cfg, const ag_mcp_http_opts_t *o,
                    volatile sig_atomic_t *stop, err_t *err);

/* Is the Origin header value `origin` acceptable: a loopback origin
 * (http or https on localhost, 127.0.0.1 or [::1], any port) or one of
 * extra[0..n)? */
bool ag_mcp_http_origin_ok(const char *origin, const char *const *extra, int n);

#endif
