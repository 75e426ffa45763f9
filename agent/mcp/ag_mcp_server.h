/*
 * ag_mcp_server: one MCP session's protocol state and its methods, over
 * any transport. Takes parsed JSON-RPC messages (ag_mcp_rpc.h), returns
 * the response to send (or nothing), and runs tools in the session's box
 * (ag_mcp_tools.h).
 *
 * Methods: initialize (version negotiation; capabilities tools and logging;
 * instructions), ping, tools/list, tools/call, logging/setLevel; the
 * notifications initialized and cancelled. Anything else is -32601.
 * Requests other than initialize and ping before initialize are -32600.
 *
 * A tools/call whose params._meta.progressToken is set gets
 * notifications/progress with each line the cell prints (through io.send).
 * notifications/cancelled for the running request interrupts the kernel
 * (its state is kept) and no response is sent, as the spec says.
 *
 * One thread handles a server's messages at a time; ag_mcp_server_cancel
 * may be called from any thread.
 */
#ifndef AGENT_MCP_AG_MCP_SERVER_H
#define AGENT_MCP_AG_MCP_SERVER_H

#include "agent/mcp/ag_mcp_tools.h"
#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>

typedef struct ag_mcp_server ag_mcp_server_t;

/* The transport, seen from inside a long request; members may be NULL. */
typedef struct ag_mcp_io {
    /* Send a notification to the client now (msg borrowed). */
    void (*send)(void *arg, const json_t *msg);
    /* Called about every 100 ms while a tool runs: read what the client
     * sent meanwhile (and call ag_mcp_server_cancel for cancellations). */
    void (*pump)(void *arg);
    void *arg;
} ag_mcp_io_t;

ag_mcp_server_t *ag_mcp_server_new(const ag_mcp_config_t *cfg);
/* Ends the session: kills its kernel, removes its sandbox. */
void ag_mcp_server_destroy(ag_mcp_server_t **p);
/* ag_mcp_server_destroy() for a process about to exit: its kernel is not
 * waited for (ag_mcp_box_hand_off). */
void ag_mcp_server_hand_off(ag_mcp_server_t **p);

/* Handle one message or batch (borrowed). Returns the response (an object,
 * or an array for a batch; new reference) or NULL when nothing is to be
 * sent (notifications, client responses, a cancelled request). */
json_t *ag_mcp_server_handle(ag_mcp_server_t *s, const json_t *msg,
                             const ag_mcp_io_t *io);

/* Cancel request `id` if it is running (NULL: whatever runs, e.g. the
 * client went away). Thread-safe. */
void ag_mcp_server_cancel(ag_mcp_server_t *s, const json_t *id);

/* The negotiated revision, or NULL before initialize. */
const char *ag_mcp_server_version(ag_mcp_server_t *s);

/* The session's box (its kernel, files and notebook). Borrowed. */
ag_mcp_box_t *ag_mcp_server_box(ag_mcp_server_t *s);

#endif
