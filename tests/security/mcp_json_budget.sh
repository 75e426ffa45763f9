#!/bin/sh
# Dense JSON against `jupyter-agent mcp --http`: see mcp_json_budget.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/mcp_json_budget.py"
