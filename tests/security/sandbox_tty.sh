#!/bin/sh
# `jupyter-agent sandbox` under a terminal: see sandbox_tty.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/sandbox_tty.py"
