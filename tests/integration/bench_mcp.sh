#!/bin/sh
# TAP: bench/mcp.py measures what the MCP server answers, whatever it sends
# first. With --no-sandbox the server sends a notifications/message warning
# before the first response; the benchmark must wait for the response with
# the request's id (it used to read one line per call and die of
# KeyError: 'result', so `make bench` printed no MCP rows).
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-bench-mcp-XXXXXX)
trap 'rm -rf "$T"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=$(cd "$(dirname "$BIN")" && pwd)

# The stdio row with --no-sandbox, 3 timed calls after 10 warm-up calls.
BUILD="$BUILD_DIR" QUICK=1 "$PY" - "$ROOT/bench" >"$T/out" 2>"$T/err" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["mcp.py", "3"]
import mcp
try:
    print(json.dumps(mcp.bench_stdio(False)))
finally:
    import shutil
    shutil.rmtree(mcp.TMP, ignore_errors=True)
PY
rc=$?
ok $rc "bench/mcp.py's --no-sandbox stdio row completes past the server's warning"
[ $rc = 0 ] || diag "$T/out" "$T/err"
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["n"] == 3 and r["p50_ms"] > 0, r' "$T/out" 2>/dev/null
ok $? "the row has its 3 samples and a p50"

# read_response skips notifications and other ids and finds the answer.
"$PY" - "$ROOT/bench" >"$T/out2" 2>&1 <<'PY'
import io, json, sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["mcp.py", "1"]
import mcp, shutil
shutil.rmtree(mcp.TMP, ignore_errors=True)
lines = [{"jsonrpc": "2.0", "method": "notifications/message",
          "params": {"level": "warning", "data": "x"}},
         {"jsonrpc": "2.0", "id": 6, "result": {"no": 1}},
         {"jsonrpc": "2.0", "id": 7, "result": {"yes": 1}}]
s = io.StringIO("".join(json.dumps(m) + "\n" for m in lines))
assert mcp.read_response(s, 7)["result"] == {"yes": 1}
PY
ok $? "a response is matched by id, after notifications and other answers"
[ -s "$T/out2" ] && diag "$T/out2"
done_testing
