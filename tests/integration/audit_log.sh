#!/bin/sh
# --audit FILE with real sandboxed exec, run and mcp --http sessions, and
# audit verify on the logs they wrote: see audit_log.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/integration/audit_log.py"
