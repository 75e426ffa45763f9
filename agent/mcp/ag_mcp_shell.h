/*
 * ag_mcp_shell: MCP's `shell` tool, a command in the session's own box
 * (sandbox/sb_cmds.h): the same namespaces, files (/mnt/data, /home/user,
 * /tmp), user and confinement as the kernel, so it sees what the kernel
 * wrote and the kernel sees what it wrote.
 *
 *   shell(command, timeout?, cwd?)   `sh -c COMMAND` in cwd (default
 *       /mnt/data). Output lines stream as progress notifications (at most
 *       AG_MCP_SHELL_PROGRESS lines); the result has stdout and stderr
 *       (head and tail kept around a marker past AG_MCP_SHELL_TEXT bytes),
 *       structuredContent {exit_code, stdout, stderr, timed_out,
 *       output_capped}; a non-zero exit, a timeout or a kill is isError.
 * Bounds: the operator's --timeout is the default and the upper bound of
 * `timeout`; at most AG_MCP_SHELL_OUTPUT bytes of output, past which the
 * command is killed; everything the command started in its process group
 * is killed when the call returns; a cancelled call (notifications/
 * cancelled) kills it too.
 */
#ifndef AGENT_MCP_AG_MCP_SHELL_H
#define AGENT_MCP_AG_MCP_SHELL_H

#include "agent/session/ag_session.h"

#include <jansson.h>
#include <stdbool.h>

#define AG_MCP_SHELL_OUTPUT ((size_t)1 << 20)
#define AG_MCP_SHELL_TEXT ((size_t)64 * 1024)
#define AG_MCP_SHELL_PROGRESS 1000
#define AG_MCP_SHELL_MAX_TIMEOUT_S 3600

#define AG_MCP_SHELL_DESCRIPTION                                               \
    "Run a shell command (sh -c) in the same sandbox as the python kernel: "   \
    "the same files (/mnt/data, /home/user, /tmp), the same user, no "         \
    "network. The working directory is /mnt/data unless cwd says "             \
    "otherwise. Output lines stream as progress; the result has stdout, "      \
    "stderr and the exit code. Bounded by the server's --timeout and 1 MiB "   \
    "of output (the command is killed past either); anything it leaves "       \
    "running is killed when the call returns."

#define AG_MCP_SHELL_INPUT                                                     \
    "{\"type\": \"object\", \"properties\": {\"command\": {\"type\": "         \
    "\"string\", \"description\": \"the shell command line (sh -c)\"}, "       \
    "\"timeout\": {\"type\": \"number\", \"exclusiveMinimum\": 0, "            \
    "\"maximum\": 3600, \"description\": \"seconds before it is killed "       \
    "(default and upper bound: the server's --timeout)\"}, \"cwd\": "          \
    "{\"type\": \"string\", \"description\": \"absolute working directory "    \
    "inside the sandbox (default /mnt/data)\"}}, \"required\": "               \
    "[\"command\"], \"additionalProperties\": false}"

#define AG_MCP_SHELL_OUTPUT_SCHEMA                                             \
    "{\"type\": \"object\", \"properties\": {\"exit_code\": {\"type\": "       \
    "\"integer\"}, \"stdout\": {\"type\": \"string\"}, \"stderr\": "           \
    "{\"type\": \"string\"}, \"timed_out\": {\"type\": \"boolean\"}, "         \
    "\"output_capped\": {\"type\": \"boolean\"}}, \"required\": "              \
    "[\"exit_code\", \"stdout\", \"stderr\", \"timed_out\", "                  \
    "\"output_capped\"]}"

/* How a running call reports back (ag_mcp_call_t's members); each may be
 * NULL. */
typedef struct ag_mcp_shell_io {
    void (*progress)(void *arg, const char *line); /* one output line */
    bool (*should_stop)(void *arg);                /* true: cancel */
    void *arg;
} ag_mcp_shell_io_t;

/* Run the call's command in `s`'s box (borrowed; NULL with `why` when
 * there is no session). `timeout_ms` is the operator's (0 = none); `io`
 * reports progress and may cancel (then *stopped is set). Returns the
 * CallToolResult (new reference). */
json_t *ag_mcp_shell_call(ag_session_t *s, const char *why, int timeout_ms,
                          const json_t *args, const ag_mcp_shell_io_t *io,
                          bool *stopped);

#endif
