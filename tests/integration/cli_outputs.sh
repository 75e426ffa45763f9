#!/bin/sh
# TAP: what the commands write to paths the user names. An output (-o,
# --record, --notebook) is a new file or replaces a regular file: a
# device node, a FIFO or a symbolic link is refused (exit 2) and left as
# it was, and '-o -' is standard output where a notebook or an archive
# can go there. ask checks its notebook and SESSION_files/ before the
# first model call. --keep-workspace DIR is checked before the session
# starts, and a copy-out that fails is exit 7 naming what was not copied.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") # for the cd below
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
session_tmpdir outputs

cat >"$T/nb.ipynb" <<'NB'
{"cells": [{"cell_type": "code", "execution_count": null, "id": "a1",
  "metadata": {}, "outputs": [], "source": "print(6 * 7)"}],
 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
  "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
NB
# A replayed model whose one cell leaves a marker: proof it ran.
$PY "$(dirname "$0")/../tools/replay_session.py" "$T/model.jsonl" \
    "open('/mnt/data/out/new.txt', 'w').write('new')
print('ran')"

mkfifo "$T/fifo"
echo keep >"$T/target"
ln -s "$T/target" "$T/link"
# A device node of our own (root may make one; /dev/null's numbers).
if mknod "$T/dev" c 1 3 2>/dev/null; then have_dev=1; else have_dev=0; fi
unchanged() { # the three planted things are still what they were
    [ -p "$T/fifo" ] && [ -L "$T/link" ] && [ "$(cat "$T/target")" = keep ] &&
        { [ "$have_dev" = 0 ] || [ -c "$T/dev" ]; }
}

# ---- -o: never a device, FIFO or symlink made a regular file -----------
for kind in fifo link dev; do
    [ "$kind" = dev ] && [ "$have_dev" = 0 ] && {
        ok 0 "# skip run -o DEVICE: cannot make a device node here"
        continue
    }
    run run --warm cold -q "$T/nb.ipynb" -o "$T/$kind"
    [ "$rc" = 2 ] && unchanged && grep -q "not a regular file" "$T/err"
    ok $? "run -o $kind is refused (exit 2, got $rc) and the $kind stays as it was"
    [ "$rc" = 2 ] || diag "$T/err"
done

run ask --warm cold --model "replay:$T/model.jsonl" -o "$T/fifo" "save"
[ "$rc" = 2 ] && unchanged && ! grep -q '^ran' "$T/out"
ok $? "ask -o FIFO is refused (exit 2, got $rc) before the model runs"
[ "$rc" = 2 ] || diag "$T/out" "$T/err"

run ask --warm cold --model "replay:$T/model.jsonl" --record "$T/link" \
    -o "$T/rec.ipynb" "save"
[ "$rc" = 2 ] && unchanged && grep -q -- "--record" "$T/err"
ok $? "ask --record SYMLINK is refused (exit 2, got $rc); its target is untouched"
[ "$rc" = 2 ] || diag "$T/err"

for kind in fifo link; do
    run archive pack "$T/nb.ipynb" --no-probe --force -o "$T/$kind"
    [ "$rc" = 2 ] && unchanged && grep -q "not a regular file" "$T/err"
    ok $? "archive pack --force -o $kind is refused (exit 2, got $rc)"
    [ "$rc" = 2 ] || diag "$T/err"
done

run mcp --notebook "$T/fifo"
[ "$rc" = 2 ] && unchanged
ok $? "mcp --notebook FIFO is refused at the start (exit 2, got $rc)"

run kernelspec install --prefix "$T/ks"
k=$(ls -d "$T"/ks/share/jupyter/kernels/* 2>/dev/null | head -1)
rm -f "$k/logo-64x64.png" && mkfifo "$k/logo-64x64.png"
timeout -k 2 20 "$BIN" kernelspec install --prefix "$T/ks" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] && [ -p "$k/logo-64x64.png" ] && grep -q "a FIFO" "$T/err"
ok $? "kernelspec install over a FIFO logo is refused at once (exit 2, got $rc), not blocked on"

# ---- -o -: standard output ---------------------------------------------
(cd "$T" && timeout -k 5 300 "$BIN" run --warm cold -q nb.ipynb -o - \
    >"$T/stdout.ipynb" 2>"$T/err" </dev/null)
rc=$?
[ "$rc" = 0 ] && [ ! -e "$T/-" ] && $PY -c '
import json, sys
nb = json.load(open(sys.argv[1]))
assert "".join(nb["cells"][0]["outputs"][0]["text"]) == "42\n", nb
' "$T/stdout.ipynb"
ok $? "run -o - writes the executed notebook to stdout, not a file named '-'"
[ "$rc" = 0 ] || diag "$T/err"

(cd "$T" && timeout -k 5 300 "$BIN" archive pack nb.ipynb --no-probe -o - \
    >"$T/stdout.zip" 2>"$T/err" </dev/null)
rc=$?
[ "$rc" = 0 ] && [ ! -e "$T/-" ] && $PY -c '
import sys, zipfile
assert "report.ipynb" in zipfile.ZipFile(sys.argv[1]).namelist()
' "$T/stdout.zip"
ok $? "archive pack -o - writes the zip to stdout, not a file named '-'"
[ "$rc" = 0 ] || diag "$T/err"

# ---- ask: the notebook and SESSION_files/ before the first model call ----
echo '{"old": true}' >"$T/close.ipynb"
mkdir "$T/close_files" && echo old >"$T/close_files/old.txt"
run ask --warm cold --model "replay:$T/model.jsonl" -o "$T/close.ipynb" "save"
[ "$rc" = 2 ] && grep -q old "$T/close.ipynb" && ! grep -q '^ran' "$T/out" &&
    grep -q "already exists" "$T/err"
ok $? "ask -o EXISTING.ipynb is refused before the model runs (exit 2, got $rc)"
[ "$rc" = 2 ] || diag "$T/out" "$T/err"

rm "$T/close.ipynb"
run ask --warm cold --model "replay:$T/model.jsonl" -o "$T/close.ipynb" "save"
[ "$rc" = 2 ] && [ ! -e "$T/close.ipynb" ] && ! grep -q '^ran' "$T/out" &&
    grep -q "close_files" "$T/err"
ok $? "ask with a non-empty SESSION_files/ is refused before the model runs (exit 2, got $rc)"
[ "$rc" = 2 ] || diag "$T/out" "$T/err"

echo '{"old": true}' >"$T/close.ipynb"
run ask --warm cold --force --model "replay:$T/model.jsonl" \
    -o "$T/close.ipynb" "save"
[ "$rc" = 0 ] && ! grep -q '"old"' "$T/close.ipynb" &&
    [ "$(cat "$T/close_files/old.txt")" = old ] &&
    [ "$(cat "$T/close_files/new.txt")" = new ]
ok $? "ask --force replaces the notebook and adds to SESSION_files/ (exit $rc)"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

# ---- --keep-workspace: checked first, and a failed copy is exit 7 -------
mkdir "$T/kw" && echo x >"$T/kw/a"
run exec --warm cold --keep-workspace "$T/kw" -c 'print("ran")'
[ "$rc" = 2 ] && ! grep -q ran "$T/out" && grep -q "not empty" "$T/err"
ok $? "exec --keep-workspace NON-EMPTY-DIR is refused before the box starts (exit 2, got $rc)"
[ "$rc" = 2 ] || diag "$T/out" "$T/err"

run exec --warm cold --keep-workspace "$T/no/such/dir" -c 'print("ran")'
[ "$rc" = 2 ] && ! grep -q ran "$T/out" && grep -q "$T/no/such" "$T/err"
ok $? "exec --keep-workspace with a missing parent is refused first (exit 2, got $rc)"
[ "$rc" = 2 ] || diag "$T/out" "$T/err"

mkdir "$T/real"
ln -s "$T/real" "$T/kwlink"
run exec --warm cold --keep-workspace "$T/kwlink" -c 'print("ran")'
[ "$rc" = 2 ] && ! grep -q ran "$T/out" && [ -z "$(ls -A "$T/real")" ]
ok $? "exec --keep-workspace SYMLINK is refused first (exit 2, got $rc)"
[ "$rc" = 2 ] || diag "$T/out" "$T/err"

run exec --warm cold --keep-workspace "$T/kw2" \
    -c 'import os; os.mkfifo("pipe"); open("kept.txt", "w").write("k")'
[ "$rc" = 7 ] && grep -q "pipe" "$T/err" && grep -q "kw2" "$T/err" &&
    [ "$(cat "$T/kw2/kept.txt")" = k ]
ok $? "exec: a copy-out that skips an entry is exit 7 naming it and DIR (got $rc)"
[ "$rc" = 7 ] || diag "$T/out" "$T/err"

run exec --warm cold --json --keep-workspace "$T/kw3" \
    -c 'import os; os.mkfifo("pipe")'
[ "$rc" = 7 ] && $PY -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert "pipe" in o["keep_workspace_error"], o
' "$T/out"
ok $? "exec --json: the failed copy-out is in the JSON object and exit 7 (got $rc)"
[ "$rc" = 7 ] || diag "$T/out" "$T/err"

cat >"$T/fifo.ipynb" <<'NB'
{"cells": [{"cell_type": "code", "execution_count": null, "id": "a1",
  "metadata": {}, "outputs": [], "source": "import os; os.mkfifo('pipe')"}],
 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
  "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
NB
run run --warm cold -q --keep-workspace "$T/kw4" "$T/fifo.ipynb" \
    -o "$T/fifo.out.ipynb"
[ "$rc" = 7 ] && grep -q "pipe" "$T/err" && [ -f "$T/fifo.out.ipynb" ]
ok $? "run: a copy-out that skips an entry is exit 7 naming it (got $rc)"
[ "$rc" = 7 ] || diag "$T/out" "$T/err"

run run --warm cold -q --keep-workspace "$T/kw" "$T/nb.ipynb" -o "$T/x.ipynb"
[ "$rc" = 2 ] && [ ! -e "$T/x.ipynb" ]
ok $? "run --keep-workspace NON-EMPTY-DIR is refused before the box starts (exit 2, got $rc)"

done_testing
