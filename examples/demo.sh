#!/bin/sh
# The finance demo (`make demo`): a 2026 budget and four quarters of GL
# actuals go into a fresh sandbox; the agent writes a variance report with
# charts, and the session becomes a notebook under the build directory, so
# that a demo never rewrites a committed file:
#
#   $BUILD/demo/quarterly-variance.ipynb        the session
#   $BUILD/demo/quarterly-variance_files/       the charts and table
#
# The committed examples/notebooks/quarterly-variance.ipynb is regenerated
# only on purpose: `make demo-notebook` (DEMO_REPLAY=1 DEMO_OUT=that path).
#
# With OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENAI_BASE_URL or
# JUPYTER_AGENT_MODEL set, a live model does the work (its notebook is
# written as $BUILD/demo/quarterly-variance-live.ipynb, and its turns are
# recorded next to it, quarterly-variance-live.jsonl, so it can be replayed
# with --model replay:THAT; nothing is written into the source tree).
# Otherwise the recorded session examples/sessions/quarterly-variance.jsonl
# is replayed: the model's turns come from the file, but every cell really
# runs in the sandbox. DEMO_REPLAY=1 forces the replay; DEMO_OUT=PATH.ipynb
# writes the notebook (and PATH_files/) elsewhere.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
BIN=${JUPYTER_AGENT_BIN:-$BUILD/jupyter-agent}
[ -x "$BIN" ] || { echo "demo: $BIN is not built; run make first" >&2; exit 2; }

QUESTION="Here are our 2026 budget and the GL actuals for each quarter. \
Give me a variance report by department, account and quarter: flag the \
biggest variances, explain what caused them, and make charts."

set --
for f in examples/data/budget_2026.csv examples/data/actuals_2026_q*.csv; do
    set -- "$@" --file "$f"
done

live="" record=""
if [ "${DEMO_REPLAY:-0}" != 1 ]; then
    for v in "${JUPYTER_AGENT_MODEL:-}" "${OPENAI_API_KEY:-}" \
        "${ANTHROPIC_API_KEY:-}" "${OPENAI_BASE_URL:-}"; do
        [ -n "$v" ] && live=1
    done
fi

if [ -n "$live" ]; then
    out=${DEMO_OUT:-$BUILD/demo/quarterly-variance-live.ipynb}
    model=${JUPYTER_AGENT_MODEL:-}
    if [ -z "$model" ] && [ -z "${OPENAI_API_KEY:-}" ] &&
        [ -z "${ANTHROPIC_API_KEY:-}" ]; then
        model=openai:gpt-4o # a local server: set JUPYTER_AGENT_MODEL to name its model
    fi
    record=${out%.ipynb}.jsonl
    echo "demo: asking a live model${model:+ ($model)}; the notebook goes to $out"
    set -- "$@" --record "$record"
    [ -n "$model" ] && set -- "$@" --model "$model"
else
    out=${DEMO_OUT:-$BUILD/demo/quarterly-variance.ipynb}
    echo "demo: no OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENAI_BASE_URL set, so"
    echo "demo: replaying the recorded session examples/sessions/quarterly-variance.jsonl"
    echo "demo: (the model's turns come from the file; the code really runs in the sandbox)"
    set -- "$@" --model replay:examples/sessions/quarterly-variance.jsonl
fi
echo

mkdir -p "$(dirname "$out")"
# A demo replaces its own last run: ask refuses an existing notebook.
rm -rf "${out%.ipynb}_files"
rm -f "$out"
status=0
"$BIN" ask "$@" -o "$out" "$QUESTION" || status=$?
if [ -f "$out" ]; then
    # The session records each --file input with its absolute path; name it
    # relative to the notebook instead, so that the notebook (committed, or
    # moved with its data) packs into a re-runnable archive from any
    # checkout: 'archive pack' reads a relative input path from the
    # notebook's directory.
    "$PYTHON" - "$out" <<'PY' || status=1
import os, sys, nbformat
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
here = os.path.dirname(os.path.abspath(path))
inputs = nb.metadata.get("jupyter_agent", {}).get("inputs", [])
for i in inputs:
    if os.path.isabs(i["path"]):
        i["path"] = os.path.relpath(i["path"], here)
nbformat.write(nb, path)
print("demo: %s records %d inputs" % (path, len(inputs)))
PY
    "$PYTHON" -c 'import sys, nbformat
nb = nbformat.read(sys.argv[1], as_version=4)
nbformat.validate(nb)
print("demo: %s is a valid nbformat %d.%d notebook (%d cells)"
      % (sys.argv[1], nb.nbformat, nb.nbformat_minor, len(nb.cells)))' "$out" ||
        status=1
    files=${out%.ipynb}_files
    if [ -d "$files" ] && [ -n "$(ls -A "$files")" ]; then
        echo "demo: the notebook is $out, its charts and table in $files/"
    else
        echo "demo: the notebook is $out; the model saved no files to /mnt/data/out/, so there are no charts beside it"
    fi
fi
if [ -n "$live" ] && [ -s "$record" ]; then
    echo "demo: the model's turns are in $record; replay them with --model replay:$record"
fi
exit $status
