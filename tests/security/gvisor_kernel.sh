#!/bin/sh
# TAP: real ipykernels under --engine gvisor: a notebook run end to end
# (--file in, --keep-workspace out through the sb_outdir rules, a 20 000
# line flood through the relay, the engine in the notebook's metadata),
# the same notebook's outputs under both engines (parity), and an
# interrupt that reaches the kernel through the relay. One gVisor kernel
# per command (runsc under ptrace: a cold kernel takes ~10 s here).
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
if [ "$(id -u)" != 0 ]; then
    echo "ok 1 # skip --engine gvisor needs root (runsc does)"
    echo "1..1"
    exit 0
fi
T=$(mktemp -d /tmp/ja-gvk-test-XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 755 "$T"
start=$(date +%s)

printf 'a,b\n1,2\n3,4\n' >"$T/data.csv"
chmod 644 "$T/data.csv"
$PY - "$T/nb.ipynb" <<'EOF'
import json, sys
cells = [
    "print(open('/mnt/data/data.csv').read().splitlines()[-1])",
    "1 + 1",
    "import os\nopen('/mnt/data/out.txt', 'w').write('made in the box')\nos.symlink('/etc/passwd', '/mnt/data/link')\nsorted(os.listdir('/mnt/data'))",
    "for i in range(20000):\n    print(i)",
    "import platform\nplatform.release() == '4.4.0'",
]
nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
      "cells": [{"cell_type": "code", "id": "c%d" % i, "metadata": {}, "source": c, "outputs": [], "execution_count": None} for i, c in enumerate(cells)]}
json.dump(nb, open(sys.argv[1], "w"))
EOF

# outputs of cells 0-3 as text (cell 4 says which kernel it saw)
outputs() {
    $PY - "$1" <<'EOF'
import json, sys
nb = json.load(open(sys.argv[1]))
for c in nb["cells"]:
    text = ""
    for o in c.get("outputs", []):
        text += "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
    lines = text.splitlines()
    print(len(lines), lines[-1] if lines else "")
EOF
}

mkdir "$T/kept-gv"
"$BIN" run --engine gvisor --timeout 120 --file "$T/data.csv" \
    --keep-workspace "$T/kept-gv/ws" "$T/nb.ipynb" -o "$T/gv.ipynb" \
    >"$T/out" 2>"$T/err.gv"
rc=$?
cp "$T/err.gv" "$T/err"
outputs "$T/gv.ipynb" >"$T/gv.txt" 2>&1
# exit 7: the copy-out skipped the symlink (checked below)
[ "$rc" = 7 ] && sed -n 1p "$T/gv.txt" | grep -q "^1 3,4$" &&
    sed -n 2p "$T/gv.txt" | grep -q "^1 2$" &&
    sed -n 4p "$T/gv.txt" | grep -q "^20000 19999$" &&
    sed -n 5p "$T/gv.txt" | grep -q "^1 True$"
ok $? "a notebook runs under gVisor: --file in, 1+1, a 20000-line flood through the relay, gVisor's kernel (exit $rc: $(tr '\n' ' ' <"$T/gv.txt"))"
[ "$rc" = 7 ] || diag "$T/err"

grep -q '"engine": "gvisor"' "$T/gv.ipynb"
ok $? "the notebook's metadata records the engine (gvisor)"

[ "$(cat "$T/kept-gv/ws/out.txt" 2>/dev/null)" = "made in the box" ] &&
    [ ! -e "$T/kept-gv/ws/link" ] && [ ! -L "$T/kept-gv/ws/link" ] &&
    grep -q "skipped 1 unsafe entry: 'link' (symbolic link)" "$T/err.gv"
ok $? "--keep-workspace copies the box's file out and leaves its symlink behind (sb_outdir rules)"

"$BIN" run --engine namespaces --timeout 120 --file "$T/data.csv" \
    "$T/nb.ipynb" -o "$T/ns.ipynb" >"$T/out" 2>"$T/err"
outputs "$T/ns.ipynb" >"$T/ns.txt" 2>&1
head -4 "$T/gv.txt" >"$T/gv4"
head -4 "$T/ns.txt" >"$T/ns4"
cmp -s "$T/gv4" "$T/ns4" && sed -n 5p "$T/ns.txt" | grep -q "^1 False$"
ok $? "parity: cells 1-4 give the same outputs under both engines (namespaces: $(tr '\n' ' ' <"$T/ns.txt"))"

"$BIN" exec --engine gvisor --timeout 20 -c 'import time
print("sleeping", flush=True)
time.sleep(300)' >"$T/out" 2>"$T/err"
rc=$?
grep -q "KeyboardInterrupt" "$T/out" "$T/err" && grep -q "interrupted; kernel state kept" "$T/err"
ok $? "--timeout interrupts a gVisor kernel through the relay (SIGINT), keeping its state (exit $rc)"

# --packages under gVisor: a signed wheel installs into the box as under
# namespaces (verified on the host, installed inside, offline).
mkdir "$T/wheels" "$T/none"
$PY - "$T/wheels" <<'EOF'
import base64, hashlib, os, sys, zipfile
def b64(d):
    return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
di = "greet-1.0.dist-info"
files = {"greet/__init__.py": b"def f():\n    return 'hello from greet'\n",
         di + "/METADATA": b"Metadata-Version: 2.1\nName: greet\nVersion: 1.0\n",
         di + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
rec = ["%s,sha256=%s,%d" % (k, b64(v), len(v)) for k, v in files.items()] + [di + "/RECORD,,"]
files[di + "/RECORD"] = ("\n".join(rec) + "\n").encode()
with zipfile.ZipFile(os.path.join(sys.argv[1], "greet-1.0-py3-none-any.whl"), "w") as z:
    for k, v in files.items():
        z.writestr(zipfile.ZipInfo(k, (2020, 1, 1, 0, 0, 0)), v)
EOF
"$BIN" manifest keygen -o "$T/a.key" --label gv >/dev/null 2>&1 &&
    "$BIN" manifest sign --key "$T/a.key" "$T/wheels" >/dev/null 2>&1
chmod -R a+rX "$T/wheels"
JUPYTER_AGENT_TRUSTED_KEYS=$T/none "$BIN" exec --engine gvisor --timeout 60 \
    --packages "$T/wheels" --trust "$T/a.key.pub" --install greet \
    -c 'import greet, platform; print(greet.f(), platform.release())' >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && grep -q "^hello from greet 4.4.0$" "$T/out" && grep -q "installed greet 1.0" "$T/err"
ok $? "--packages installs a signed wheel into a gVisor kernel (exit $rc: $(cat "$T/out"))"
[ "$rc" = 0 ] || diag "$T/err"

# archive rerun replays the recorded engine: a cell that is True only
# under gVisor reproduces (without the engine it would run under
# namespaces, print False and differ).
$PY - "$T/one.ipynb" <<'EOF'
import json, sys
nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
      "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "source": "import platform\nprint(platform.release() == '4.4.0')", "outputs": [], "execution_count": None}]}
json.dump(nb, open(sys.argv[1], "w"))
EOF
"$BIN" run --engine gvisor "$T/one.ipynb" -o "$T/one.out.ipynb" >"$T/out" 2>"$T/err" &&
    "$BIN" archive pack "$T/one.out.ipynb" -o "$T/one.zip" --no-probe >"$T/out" 2>"$T/err" &&
    "$BIN" archive rerun "$T/one.zip" --allow-unsigned -o "$T/re.ipynb" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && grep -q "1 of 1 cells reproduced" "$T/out" "$T/err" &&
    grep -q '"engine": "gvisor"' "$T/re.ipynb"
ok $? "archive rerun uses the recorded engine (gvisor): the gVisor-only cell reproduces (exit $rc)"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

echo "# gvisor_kernel.sh: $(($(date +%s) - start)) s"
done_testing
