#!/bin/sh
# TAP: 'jupyter-agent run' given a hostile notebook path by a local user: a
# FIFO nobody writes to, a device, an oversized file. Each must be refused
# at once with a clear error (exit 2) and never hang or eat memory.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-nbin-test-XXXXXX)
trap 'rm -rf "$T"' EXIT
export HOME="$T/home" XDG_RUNTIME_DIR="$T/xdg"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
run() { # stdout to $T/out, stderr to $T/err, status in $rc; 20 s at most
    timeout -k 2 20 "$BIN" run --no-sandbox -q "$@" >"$T/out" 2>"$T/err" \
        </dev/null
    rc=$?
}

mkfifo "$T/fifo.ipynb"
expect 2 "not a regular file" \
    "a FIFO as NOTEBOOK is refused at once (no hang in open), exit 2" \
    -- "$T/fifo.ipynb" -o "$T/o1.ipynb"

expect 2 "not a regular file" \
    "a character device (/dev/zero) as NOTEBOOK is refused, exit 2" \
    -- /dev/zero -o "$T/o2.ipynb"

# A valid notebook padded past the cap with one long markdown source.
/usr/bin/python3 - "$T/big.ipynb" <<'PY'
import json, sys
nb = {"cells": [{"cell_type": "markdown", "id": "a", "metadata": {},
                 "source": "x" * (3 << 20)}],
      "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open(sys.argv[1], "w"))
PY
expect 2 "over the 2097152-byte cap; raise --max-notebook-size" \
    "a notebook over --max-notebook-size 2M is refused naming the flag" \
    -- --max-notebook-size 2M "$T/big.ipynb" -o "$T/o3.ipynb"

run --max-notebook-size 8M "$T/big.ipynb" -o "$T/o4.ipynb"
[ "$rc" = 0 ] && [ -s "$T/o4.ipynb" ]
ok $? "the same notebook runs once --max-notebook-size is raised (exit $rc)"

"$BIN" run --help >"$T/out" 2>&1
grep -q -- "--max-notebook-size BYTES" "$T/out" && grep -q "256M" "$T/out"
ok $? "run --help documents --max-notebook-size and its 256M default"

done_testing
