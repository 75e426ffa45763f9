#!/bin/sh
# TAP: test_hostile_flood (a hostile kernel floods the agent) with the
# kernel under --engine gvisor, so every message crosses our relay. The
# finite floods run; the endless ones need FLOOD_ALL=1 (each ends in a
# gVisor kernel restart, ~25 s under ptrace).
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
if [ "$(id -u)" != 0 ]; then
    echo "ok 1 # skip --engine gvisor needs root (runsc does)"
    echo "1..1"
    exit 0
fi
ENGINE=gvisor exec "$(dirname "$BIN")/tests/security/test_hostile_flood"
