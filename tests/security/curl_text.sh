#!/bin/sh
# curl's error text quoting a hostile server, escaped: see curl_text.py.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}" "$ROOT/tests/security/curl_text.py"
