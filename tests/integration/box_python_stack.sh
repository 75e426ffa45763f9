#!/bin/sh
# TAP: the analyst's Python stack is there inside the box. Every package of
# DEB_BOX_PYTHON (tools/packages.mk) imports in a real
# sandboxed kernel (the box mounts the host's /usr read-only), and pandas
# reads real Excel files there: .xlsx written by openpyxl and by xlsxwriter,
# and writes .xlsx and OpenDocument .ods back.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-stack-XXXXXX)
chmod 711 "$T" # the box user must reach the run dirs made in here
trap 'rm -rf "$T"' EXIT
export XDG_RUNTIME_DIR="$T" HOME="$T"
unset JUPYTER_AGENT_SERVE_SOCKET

# import names, one per package of DEB_BOX_PYTHON (tools/packages.mk).
MODULES="openpyxl xlsxwriter xlrd odf seaborn statsmodels.api sklearn plotly
networkx requests tabulate sqlalchemy xarray numexpr bottleneck h5py docx
pypdf markdown chardet tqdm joblib reportlab pytz dateutil bs4 lxml sympy
scipy PIL pandas numpy matplotlib"

CODE="import importlib, json
bad = {}
for m in '''$MODULES'''.split():
    try:
        importlib.import_module(m)
    except Exception as e:
        bad[m] = repr(e)
print(json.dumps(bad))"
"$BIN" exec --warm cold --json -c "$CODE" >"$T/imp.json" 2>"$T/err" </dev/null
rc=$?
"$PY" - "$T/imp.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["status"] == "ok", j
bad = json.loads(j["outputs"][0]["text"])
for m, e in bad.items():
    print("# cannot import %s in the box: %s" % (m, e))
sys.exit(1 if bad else 0)
PY
ok $? "every package of the box Python stack imports inside the sandbox"
[ $rc = 0 ] || diag "$T/err"

XL="import pandas as pd, openpyxl, xlsxwriter
wb = openpyxl.Workbook(); ws = wb.active; ws.title = 'q'
ws.append(['region', 'sales']); ws.append(['north', 10]); ws.append(['south', 32])
wb.save('a.xlsx')
w = xlsxwriter.Workbook('b.xlsx'); s = w.add_worksheet('q')
s.write_row(0, 0, ['region', 'sales']); s.write_row(1, 0, ['east', 5])
s.write_row(2, 0, ['west', 7]); w.close()
a = pd.read_excel('a.xlsx', sheet_name='q')
b = pd.read_excel('b.xlsx', sheet_name='q')
pd.concat([a, b]).to_excel('c.xlsx', index=False, engine='xlsxwriter')
c = pd.read_excel('c.xlsx')
c.to_excel('d.ods', index=False, engine='odf')
d = pd.read_excel('d.ods', engine='odf')
print(int(a.sales.sum()), int(b.sales.sum()), len(c), int(d.sales.sum()))"
"$BIN" exec --warm cold -c "$XL" >"$T/xl.out" 2>"$T/err" </dev/null
rc=$?
[ $rc = 0 ] && grep -qx "42 12 4 54" "$T/xl.out"
ok $? "pandas reads .xlsx written by openpyxl and by xlsxwriter, writes .xlsx and .ods, inside the box"
[ $rc = 0 ] && grep -qx "42 12 4 54" "$T/xl.out" || diag "$T/xl.out" "$T/err"
done_testing
