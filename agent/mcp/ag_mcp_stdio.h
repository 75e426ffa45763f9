/*
 * ag_mcp_stdio: the MCP stdio transport. Newline-delimited JSON-RPC on
 * `in_fd` / `out`, nothing else on `out` (logs go to stderr). One MCP
 * session for the life of the process.
 *
 * A message longer than AG_MCP_MAX_MESSAGE is skipped up to its newline
 * and answered with -32600 stating the cap. While a tool runs the input is
 * still read: notifications/cancelled interrupts it, other messages wait
 * their turn (at most 256 and 16 MiB; a request beyond is answered
 * AG_MCP_SERVER_BUSY at once). End of input (the client closed stdin or
 * went away) stops a running cell and ends the session: its kernel and
 * sandbox are destroyed.
 *
 * Each message written must be taken by the client within 30 s (the
 * write never blocks longer), else the session ends as "the client
 * stopped reading". --idle-timeout and --max-lifetime are applied on
 * every loop and while waiting to write (and by the box while a cell
 * runs).
 */
#ifndef AGENT_MCP_AG_MCP_STDIO_H
#define AGENT_MCP_AG_MCP_STDIO_H

#include "agent/mcp/ag_mcp_tools.h"
#include "common/err.h"

#include <signal.h>
#include <stdio.h>

/* Serve until end of input or until *stop becomes non-zero (a signal;
 * may be NULL). Writes the session's notebook to cfg->notebook_path (when
 * set) at the end. Returns 0, or -1 + err (ERR_IO: writing `out` failed;
 * the session still ended cleanly). */
int ag_mcp_stdio_run(const ag_mcp_config_t *cfg, int in_fd, FILE *out,
                     volatile sig_atomic_t *stop, err_t *err);

#endif
