#!/bin/sh
# TAP: a serve started with policy flags hands its warm kernels to sessions
# with the same flags (the take matched the default policy before, so such
# a pool never gave out a kernel), and not to sessions with other flags.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-serve-policy-XXXXXX)
chmod 700 "$T"
export JUPYTER_AGENT_SERVE_SOCKET="$T/serve.sock"
"$BIN" serve --memory 1G --pool 1 >"$T/serve.log" 2>&1 &
srv=$!
trap '"$BIN" serve --stop >/dev/null 2>&1; wait $srv; rm -rf "$T"' EXIT
i=0
while [ $i -lt 120 ]; do
    "$BIN" serve --status 2>/dev/null | grep -q '"ready": 1' && break
    sleep 0.5
    i=$((i + 1))
done
"$BIN" exec --memory 1G --warm pool -c '1+1' >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && grep -q "^2$" "$T/out"
ok $? "exec --memory 1G --warm pool gets the warm kernel of serve --memory 1G (exit $rc: $(tail -1 "$T/err"))"
"$BIN" exec --memory 2G --warm pool -c '1+1' >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" != 0 ] && grep -q "no kernels for this kernel name and sandbox policy\|other kernels" "$T/err"
ok $? "a session with another policy (--memory 2G) does not get it (exit $rc)"
done_testing
