#!/bin/sh
# sandbox.commands of the official E2B SDK against `jupyter-agent e2b`
# (tests/e2b/commands.test.mjs), through the same runner as e2b_sdk.sh.
E2B_TEST_FILE=commands.test.mjs exec sh "$(dirname "$0")/e2b_sdk.sh"
