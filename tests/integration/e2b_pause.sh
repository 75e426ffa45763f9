#!/bin/sh
# Files-only pause and resume of E2B sandboxes through the official SDK
# (tests/e2b/pause.test.mjs), through the same runner as e2b_sdk.sh.
E2B_TEST_FILE=pause.test.mjs exec sh "$(dirname "$0")/e2b_sdk.sh"
