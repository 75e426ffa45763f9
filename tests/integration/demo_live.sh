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
session_tmpdir demo
unset OPENAI_BASE_URL DEMO_OUT DEMO_REPLAY

$PY "$(dirname "$0")/../tools/replay_session.py" "$T/live.jsonl" \
    "print(len(open('/mnt/data/budget_2026.csv').read()) > 0)"

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
