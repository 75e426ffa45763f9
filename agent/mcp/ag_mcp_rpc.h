/*
 * ag_mcp_rpc: JSON-RPC 2.0 as the Model Context Protocol uses it, and the
 * protocol revisions this server speaks. No I/O: parses and builds
 * messages, so it can be tested without a transport.
 *
 * Revisions, newest first: 2025-11-25, 2025-06-18, 2025-03-26. A client
 * asking for one of them gets it; any other request gets the newest (the
 * client then decides whether to go on). Batches (a JSON array of
 * messages) exist in 2025-03-26 only; later revisions refuse them.
 *
 * Every message is capped at AG_MCP_MAX_MESSAGE bytes by the transports;
 * JSON nesting is bounded by jansson's parser (2048 levels).
 */
#ifndef AGENT_MCP_AG_MCP_RPC_H
#define AGENT_MCP_AG_MCP_RPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* JSON-RPC 2.0 error codes. */
#define AG_MCP_PARSE_ERROR (-32700)
#define AG_MCP_INVALID_REQUEST (-32600)
#define AG_MCP_METHOD_NOT_FOUND (-32601)
#define AG_MCP_INVALID_PARAMS (-32602)
#define AG_MCP_INTERNAL_ERROR (-32603)
/* Implementation-defined (-32000..-32099): refused for now, try again. */
#define AG_MCP_SERVER_BUSY (-32000)

/* The largest message a client may send, in bytes (stated in the refusal
 * and in the README). write_file content travels inside one message. */
#define AG_MCP_MAX_MESSAGE ((size_t)8 * 1024 * 1024)

#define AG_MCP_LATEST_VERSION "2025-11-25"

/* The revisions spoken, newest first, NULL-terminated. */
extern const char *const ag_mcp_versions[];

/* Is `version` one of ag_mcp_versions? (NULL: no.) */
bool ag_mcp_version_supported(const char *version);
/* The revision to answer an initialize asking for `requested` (may be
 * NULL): itself when supported, else the newest. Static string. */
const char *ag_mcp_negotiate(const char *requested);
/* Does `version` allow JSON-RPC batches? (Only 2025-03-26.) */
bool ag_mcp_batches_allowed(const char *version);

/* What a parsed message is. */
typedef enum ag_mcp_kind {
    AG_MCP_REQUEST,      /* method + id */
    AG_MCP_NOTIFICATION, /* method, no id */
    AG_MCP_RESPONSE,     /* result or error + id (a client's answer) */
    AG_MCP_INVALID       /* none of these: answer -32600 */
} ag_mcp_kind_t;

/* Classify one message object (not a batch). For AG_MCP_INVALID, *why
 * (if non-NULL) says what is wrong (static string). */
ag_mcp_kind_t ag_mcp_classify(const json_t *msg, const char **why);

/* Parse `len` bytes of one message (an object, or an array: a batch).
 * Returns a new reference, or NULL with *error set to the error response
 * to send (-32700 for bad JSON, -32600 for over AG_MCP_MAX_MESSAGE). */
json_t *ag_mcp_parse(const char *text, size_t len, json_t **error);

/* {"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M}}: a new
 * reference. `id` is borrowed; NULL (or a non-id value) gives null. */
json_t *ag_mcp_error(const json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* {"jsonrpc":"2.0","id":ID,"result":R}; `result` is stolen. */
json_t *ag_mcp_result(const json_t *id, json_t *result);
/* {"jsonrpc":"2.0","method":M,"params":P}; `params` is stolen (NULL: no
 * params). */
json_t *ag_mcp_notification(const char *method, json_t *params);

/* The message as one line of compact JSON (no newline inside: JSON
 * escapes them), as stdio and SSE frames need. New string. */
char *ag_mcp_dump(const json_t *msg);

#endif
