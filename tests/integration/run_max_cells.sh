#!/bin/sh
# TAP: a notebook of 150 000 empty cells (12 MB) is refused by run before
# it is parsed (the --max-cells cap, default 20000), so the agent's peak
# memory stays under 16 times the file's size (it was 20 times, 250 MB);
# --max-cells raises the cap and a notebook under it runs.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
session_tmpdir maxcells

$PY - "$T" <<'PY'
import json, sys
def nb(n):
    cell = {"cell_type": "code", "execution_count": None, "metadata": {},
            "outputs": [], "source": ""}
    return json.dumps({"cells": [cell] * n, "metadata": {"kernelspec": {
        "name": "python3", "display_name": "Python 3",
        "language": "python"}}, "nbformat": 4, "nbformat_minor": 4},
        separators=(",", ":"))
open(sys.argv[1] + "/big.ipynb", "w").write(nb(150000))
open(sys.argv[1] + "/small.ipynb", "w").write(nb(30))
PY
size_kb=$(($(stat -c %s "$T/big.ipynb") / 1024))

if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$T/rss" timeout -k 5 300 "$BIN" run --warm cold \
        -q "$T/big.ipynb" -o "$T/big.out.ipynb" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    rss=$(tail -1 "$T/rss")
    [ "$rc" = 2 ] && grep -q "more than 20000 cells" "$T/err" &&
        grep -q -- "--max-cells" "$T/err" && [ ! -e "$T/big.out.ipynb" ]
    ok $? "run refuses 150 000 cells (exit 2, got $rc) naming the cap and --max-cells"
    [ "$rc" = 2 ] || diag "$T/err"
    [ "$rss" -le $((size_kb * 16)) ]
    ok $? "peak memory ${rss} kB is at most 16x the ${size_kb} kB notebook"
else
    ok 0 "# skip no /usr/bin/time to measure the peak"
    ok 0 "# skip no /usr/bin/time to measure the peak"
fi
run run --warm cold -q --max-cells 10 "$T/small.ipynb" -o "$T/s.out.ipynb"
[ "$rc" = 2 ] && grep -q "more than 10 cells" "$T/err"
ok $? "--max-cells 10 refuses a 30-cell notebook (exit 2, got $rc)"
run run --warm cold -q --max-cells 30 "$T/small.ipynb" -o "$T/s.out.ipynb"
[ "$rc" = 0 ] && [ -f "$T/s.out.ipynb" ]
ok $? "--max-cells 30 runs it (exit $rc)"
[ "$rc" = 0 ] || diag "$T/err"
run run --max-cells many "$T/small.ipynb"
[ "$rc" = 2 ] && grep -q -- "--max-cells: 'many'" "$T/err"
ok $? "--max-cells many is a usage error (exit 2, got $rc)"

done_testing
