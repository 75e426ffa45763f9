#!/bin/sh
# `jupyter-agent mcp` against the official MCP client, the TypeScript SDK
# (@modelcontextprotocol/sdk, pinned by tests/mcp/package-lock.json; `npm
# ci` installs it on the first run). tests/mcp/client.test.mjs speaks TAP
# through node's test runner; every guarantee is one top-level test.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MCP="$ROOT/tests/mcp"
BIN=${JUPYTER_AGENT_BIN:-$ROOT/build/jupyter-agent}

if ! command -v node >/dev/null 2>&1; then
    echo "1..0 # skip node is missing: install Debian's nodejs (tools/install-deps)"
    exit 0
fi
if [ ! -d "$MCP/node_modules/@modelcontextprotocol/sdk" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "1..0 # skip npm is missing (needed once for 'npm ci' in tests/mcp)"
        exit 0
    fi
    if ! (cd "$MCP" && npm ci --ignore-scripts --no-audit --no-fund) >&2; then
        echo "1..0 # skip 'npm ci' in tests/mcp failed (no npm registry?)"
        exit 0
    fi
fi

T=$(mktemp -d /tmp/ja-mcp-XXXXXX)
chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
cd "$MCP" || exit 1
JUPYTER_AGENT_BIN="$BIN" MCP_TEST_DIR="$T" \
    node --test --test-reporter=tap --test-concurrency=1 client.test.mjs
