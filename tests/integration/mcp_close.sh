#!/bin/sh
# Closing MCP HTTP sessions does not wait for their kernels to die, and
# leaves nothing behind: see mcp_close.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/integration/mcp_close.py"
