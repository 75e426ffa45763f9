#!/bin/sh
# TAP: chart and table data (docs/outputs.md) from real figures in a real
# sandboxed kernel. charts_figs.py draws each chart type from known data
# (matplotlib, pandas .plot(), seaborn; twin axes, subplots, log and date
# scales, an empty figure, 10 000 and 100 000 points); charts_check.py
# compares each figure's chart data with the data plotted and validates a
# notebook of the outputs with nbformat. Then a cell that breaks the
# extractor (a monkey-patched artist that raises) still gets its PNG, a
# chart of type "unknown" and its own result, with no error; a DataFrame
# carries its table data.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=${PYTHON:-/usr/bin/python3}
. "$(dirname "$0")/../tap.sh"
session_tmpdir charts
here=$(dirname "$0")
t0=$(date +%s)

run exec --warm cold --json "$here/charts_figs.py"
ok "$rc" "the figures cell runs (exit $rc)"
[ "$rc" = 0 ] || diag "$T/err"
cp "$T/out" "$T/figs.json"
"$PY" "$here/charts_check.py" "$T/figs.json" \
    line,bar,barh,grouped,stacked,scatter,pie,box,hist,sns_bar,sns_scatter,sns_box,twin,subplots,log,date,empty,line10k,scatter100k,pandas_dates \
    >"$T/checks" 2>&1 || echo "1 charts_check.py failed" >>"$T/checks"
while read -r st what; do
    ok "$st" "$what"
done <"$T/checks"

run exec --warm cold --json -c '
import matplotlib.pyplot as plt, matplotlib.lines as ml
def boom(self, *a, **k):
    raise RuntimeError("patched artist")
fig, ax = plt.subplots()
ax.plot([1, 2, 3], label="x")
ml.Line2D.get_xdata = boom
plt.show()
6 * 7'
"$PY" - "$T/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
outs = r["outputs"]
figs = [o for o in outs if "image/png" in o.get("data", {})]
chart = figs[0]["data"]["application/vnd.jupyter-agent.chart+json"]
assert r["status"] == "ok", r["status"]
assert not [o for o in outs if o["output_type"] == "error"]
assert not [o for o in outs if o.get("name") == "stderr"], outs
assert [o["data"]["text/plain"] for o in outs
        if o["output_type"] == "execute_result"] == ["42"]
c = chart["charts"][0]
assert c["type"] == "unknown" and "patched artist" in c["reason"], c
PY
ok $? "a cell whose artist raises in the extractor keeps its PNG and result; its chart is 'unknown' with the reason"

run exec --warm cold --json -c '
import pandas as pd
pd.DataFrame({"region": ["n", "s"] * 10, "v": range(20)})'
"$PY" - "$T/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["outputs"][-1]["data"]["application/vnd.jupyter-agent.table+json"]
assert t["shape"] == [20, 2] and t["kind"] == "dataframe", t
assert [c["dtype"] for c in t["columns"]] == ["object", "int64"], t
assert t["head"]["rows"][0] == ["n", 0] and len(t["head"]["rows"]) == 10
assert t["tail"]["index"] == [15, 16, 17, 18, 19]
assert t["tail"]["rows"][-1] == ["s", 19]
PY
ok $? "a DataFrame result carries its table data: shape, dtypes, first and last rows"

# Warm kernels from 'serve', forked by the factory (matplotlib preloaded,
# so the inline backend was set up before the formatters) or started
# fresh, get the formatters too.
cat >"$T/warm.py" <<'PY'
import matplotlib.pyplot as plt
plt.bar(["a", "b"], [3, 4])
plt.show()
PY
for mode in --factory --no-factory; do
    d=$(mktemp -d "$T/serve-XXXXXX")
    chmod 700 "$d"
    "$BIN" serve --pool 1 $mode --preload 'import matplotlib.pyplot' \
        --socket "$d/s.sock" >"$d/out" 2>"$d/err" &
    spid=$!
    i=0
    until "$BIN" serve --status --socket "$d/s.sock" 2>/dev/null |
        "$PY" -c 'import json,sys; sys.exit(json.load(sys.stdin)["ready"] < 1)' \
        2>/dev/null || [ $i -ge 300 ]; do
        sleep 0.2
        i=$((i + 1))
    done
    JUPYTER_AGENT_SERVE_SOCKET="$d/s.sock" run exec --warm pool --json "$T/warm.py"
    "$PY" - "$T/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = [o["data"] for o in r["outputs"] if "image/png" in o.get("data", {})][0]
c = d["application/vnd.jupyter-agent.chart+json"]["charts"][0]
assert [(e["label"], e["value"]) for e in c["elements"]] == [("a", 3), ("b", 4)]
PY
    ok $? "a warm kernel from serve $mode has the chart formatter (exit $rc)"
    [ "$rc" = 0 ] || diag "$T/err" "$d/err"
    kill "$spid"
    wait "$spid" 2>/dev/null
done

echo "# charts.sh: $(($(date +%s) - t0)) s"
done_testing
