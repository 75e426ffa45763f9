#!/bin/sh
# Hostile signed report archives against `jupyter-agent archive`: see
# archive_hostile.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/archive_hostile.py"
