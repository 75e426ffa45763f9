#!/bin/sh
# Hostile clients against `jupyter-agent e2b` (tests/e2b/hostile.test.mjs):
# wrong keys, other sandboxes' tokens, oversized bodies and headers, an
# upload past the disk cap, half-open connections, 200 creates over
# --max-sandboxes, a client that hangs up mid-execute. The npm setup is
# tests/integration/e2b_sdk.sh's.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
E2B_TEST_FILE=hostile.test.mjs exec sh "$ROOT/tests/integration/e2b_sdk.sh"
