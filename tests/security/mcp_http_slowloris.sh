#!/bin/sh
# Half-open and trickling connections against mcp --http: see
# mcp_http_slowloris.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/mcp_http_slowloris.py"
