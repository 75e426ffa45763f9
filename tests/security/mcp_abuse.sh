#!/bin/sh
# Protocol abuse against `jupyter-agent mcp`: see mcp_abuse.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/mcp_abuse.py"
