#!/bin/sh
# TAP: `make demo` with a live model (here JUPYTER_AGENT_MODEL names a
# replayed session that saves no files, standing in for a live one) writes
# its notebook and its recorded turns under the build directory, nothing
# into the source tree, and names a _files/ directory only when one exists.
# Run twice: a demo replaces its own last notebook.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/ja-demo-XXXXXX)
chmod 711 "$T"
trap 'rm -rf "$T"' EXIT
export XDG_RUNTIME_DIR="$T" HOME="$T"
unset JUPYTER_AGENT_SERVE_SOCKET JUPYTER_GATEWAY_URL OPENAI_API_KEY \
    ANTHROPIC_API_KEY OPENAI_BASE_URL DEMO_OUT DEMO_REPLAY

$PY - "$T/live.jsonl" <<'PY'
import json, sys
turns = [
    {"jupyter_agent_replay": 1, "model": "test:live-stand-in"},
    {"text": "Looking.", "tool_calls": [{"id": "c1", "name": "python",
     "arguments": json.dumps({"code": "print(len(open('/mnt/data/budget_2026.csv').read()) > 0)"})}],
     "stop_reason": "tool_use", "usage": {"input_tokens": 0, "output_tokens": 0}},
    {"text": "The budget is there.", "tool_calls": [], "stop_reason": "end_turn",
     "usage": {"input_tokens": 0, "output_tokens": 0}},
]
with open(sys.argv[1], "w") as f:
    for t in turns:
        f.write(json.dumps(t) + "\n")
PY

untracked() {
    git -C "$ROOT" status --porcelain --untracked-files=all -- examples
}
before=$(untracked)
for pass in 1 2; do
    BUILD="$T/b" JUPYTER_AGENT_BIN="$BIN" JUPYTER_AGENT_MODEL="replay:$T/live.jsonl" \
        timeout -k 5 600 sh "$ROOT/examples/demo.sh" >"$T/out" 2>&1 </dev/null
    rc=$?
    [ "$rc" = 0 ] && [ -f "$T/b/demo/quarterly-variance-live.ipynb" ]
    ok $? "demo with a live model, run $pass, writes its notebook under BUILD/demo (exit $rc)"
    [ "$rc" = 0 ] || diag "$T/out"
done
[ "$(untracked)" = "$before" ] &&
    [ ! -e "$ROOT/examples/sessions/quarterly-variance-live.jsonl" ]
ok $? "nothing new in examples/ (no examples/sessions/quarterly-variance-live.jsonl)"
[ -s "$T/b/demo/quarterly-variance-live.jsonl" ] &&
    grep -q "replay:$T/b/demo/quarterly-variance-live.jsonl" "$T/out"
ok $? "the model's turns are recorded next to the notebook, and the replay is named"
! grep -q "quarterly-variance-live_files/" "$T/out" &&
    [ ! -e "$T/b/demo/quarterly-variance-live_files" ] &&
    grep -q "saved no files" "$T/out"
ok $? "with no files saved, no _files/ directory is named"
[ "$(cat "$T/out" | grep -c 'charts and table in')" = 0 ] || diag "$T/out"

done_testing
