#!/bin/sh
# The MCP tools' JSON Schemas (agent/mcp/ag_mcp_tool_*.json) are valid JSON
# Schema 2020-12 and wired into the tool table
# (tests/tools/check_mcp_schemas.py; python3-jsonschema).
set -u
exec "${PYTHON:-/usr/bin/python3}" tests/tools/check_mcp_schemas.py .
