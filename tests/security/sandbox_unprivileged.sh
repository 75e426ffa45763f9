#!/bin/sh
# TAP: the attack subset that must also hold when an ordinary user (not
# root) runs the sandbox: no cgroups then, rlimits and namespaces only.
# Runs test_sb_attacks --unprivileged as uid 65534 via setpriv.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
T=$(dirname "$BIN")/tests/security/test_sb_attacks
if [ ! -x "$T" ]; then
    echo "1..1"
    echo "ok 1 # skip $T is not built"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    exec "$T" --unprivileged
fi
if ! command -v setpriv >/dev/null 2>&1; then
    echo "1..1"
    echo "ok 1 # skip setpriv (util-linux) is not installed"
    exit 0
fi
cd /tmp || exit 1
exec setpriv --reuid=65534 --regid=65534 --clear-groups "$T" --unprivileged
