#!/bin/sh
# TAP: SVG figures are saved by exec --out like PNG ones (a matplotlib
# figure in SVG format, an IPython SVG), in text and --json mode; an SVG
# that would run code when opened (<script>, on...= handlers) is not saved
# and the line says why. Nothing is dropped without a word.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
. "$(dirname "$0")/../tap.sh"
session_tmpdir svg

cat >"$T/fig.py" <<'PY'
import matplotlib.pyplot as plt
from matplotlib_inline.backend_inline import set_matplotlib_formats
set_matplotlib_formats("svg")
plt.plot([1, 3, 2])
plt.show()
PY
run exec --warm cold --out "$T/figs" "$T/fig.py"
[ "$rc" = 0 ] && [ -f "$T/figs/out-1.svg" ] &&
    head -c 200 "$T/figs/out-1.svg" | grep -q '<svg\|<?xml' &&
    grep -q 'image/svg+xml saved to' "$T/out"
ok $? "exec --out saves a matplotlib SVG figure as out-1.svg (exit $rc)"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

run exec --warm cold --json --out "$T/figs2" "$T/fig.py"
[ "$rc" = 0 ] && [ -f "$T/figs2/out-1.svg" ]
ok $? "exec --json --out saves it too (exit $rc)"

run exec --warm cold --out "$T/figs3" -c '
from IPython.display import SVG, display
display(SVG("<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>"))
display(SVG("<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>"))'
[ "$rc" = 0 ] && [ -z "$(ls -A "$T/figs3")" ] &&
    grep -q 'script.*not saved' "$T/out" && grep -q 'event attribute.*not saved' "$T/out"
ok $? "an SVG with a script or an event handler is not saved, and the line says why"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

run exec --warm cold "$T/fig.py"
[ "$rc" = 0 ] && grep -q 'image/svg+xml.*pass --out DIR' "$T/out"
ok $? "without --out, the SVG figure is named with how to save it"

done_testing
