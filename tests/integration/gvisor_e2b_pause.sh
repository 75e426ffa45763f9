#!/bin/sh
# Memory pause, resume and autoResume of E2B sandboxes on the gVisor engine
# through the official SDK (tests/e2b/gvisor_pause.test.mjs), through the
# same runner as e2b_sdk.sh. Needs root and runsc.
if [ "$(id -u)" != 0 ] || ! command -v runsc >/dev/null 2>&1; then
    echo "1..0 # skip --engine gvisor needs runsc and root"
    exit 0
fi
E2B_TEST_FILE=gvisor_pause.test.mjs exec sh "$(dirname "$0")/e2b_sdk.sh"
