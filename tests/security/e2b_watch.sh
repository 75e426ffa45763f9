#!/bin/sh
# envd's polling watchers against `jupyter-agent e2b` (tests/e2b/watch.test.mjs):
# a round trip, paths outside the sandbox or through links, another
# sandbox's watcher, too many watchers, an event flood. The npm setup is
# tests/integration/e2b_sdk.sh's.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
E2B_TEST_FILE=watch.test.mjs exec sh "$ROOT/tests/integration/e2b_sdk.sh"
