#!/bin/sh
# export_notebook against symlinks and foreign files: see mcp_export.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/mcp_export.py"
