#!/bin/sh
# `jupyter-agent e2b` against the official E2B SDKs (e2b and
# @e2b/code-interpreter, pinned by tests/e2b/package-lock.json; `npm ci`
# installs them on the first run). tests/e2b/sdk.test.mjs speaks TAP
# through node's test runner; every guarantee is one top-level test.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR="$ROOT/tests/e2b"
BIN=${JUPYTER_AGENT_BIN:-$ROOT/build/jupyter-agent}

if ! command -v node >/dev/null 2>&1; then
    echo "1..0 # skip node is missing: install Debian's nodejs (tools/install-deps)"
    exit 0
fi
if [ ! -d "$DIR/node_modules/@e2b/code-interpreter" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "1..0 # skip npm is missing (needed once for 'npm ci' in tests/e2b)"
        exit 0
    fi
    if ! (cd "$DIR" && npm ci --ignore-scripts --no-audit --no-fund) >&2; then
        echo "1..0 # skip 'npm ci' in tests/e2b failed (no npm registry?)"
        exit 0
    fi
fi

T=$(mktemp -d /tmp/ja-e2b-XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$DIR" || exit 1
JUPYTER_AGENT_BIN="$BIN" E2B_TEST_DIR="$T" \
    node --test --test-reporter=tap --test-concurrency=1 "${E2B_TEST_FILE:-sdk.test.mjs}"
