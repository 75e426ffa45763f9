/*
 * ag_mcp_pysrc: the MCP tools' Python, built into the binary from the .py
 * files next to this header (scheme: kernel-bridge/pool/kb_pysrc.h).
 */
#ifndef AGENT_MCP_AG_MCP_PYSRC_H
#define AGENT_MCP_AG_MCP_PYSRC_H

#include <stddef.h>

/* ag_mcp_write_file.py: __ja_write(path, b64) writes a file in the box. */
extern const char ag_mcp_write_file_py[];
extern const size_t ag_mcp_write_file_py_len;

#endif
