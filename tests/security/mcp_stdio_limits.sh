#!/bin/sh
# An MCP stdio client that stops reading or floods: see mcp_stdio_limits.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/mcp_stdio_limits.py"
