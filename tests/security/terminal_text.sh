#!/bin/sh
# TAP: text the tool prints itself that a kernel or a notebook controls:
# input() prompts, input(password=True), a notebook's kernelspec name, and
# our status lines after raw kernel output. Real sandboxed kernels.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-term-test-XXXXXX)
trap 'rm -rf "$T"' EXIT
export HOME="$T/home"
unset XDG_RUNTIME_DIR
mkdir -p "$HOME"
ESC=$(printf '\033')
BEL=$(printf '\007')

# 1. An input() prompt carrying OSC 52 (clipboard) and OSC 0 (title).
printf 'ada\n' | timeout -k 5 180 "$BIN" exec --warm cold -c \
    'print("hi", input("\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07name? "))' \
    >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] && grep -q "hi ada" "$T/out" && ! grep -q "$ESC" "$T/err" &&
    ! grep -q "$BEL" "$T/err" && grep -qF '\e]52;c;cHduZWQ=\x07' "$T/err"
ok $? "an input() prompt's OSC 52 / OSC 0 sequences are printed escaped (exit $rc)"

# 2. input(password=True) on a terminal: what is typed is not echoed.
$PY - "$BIN" >"$T/pty" 2>&1 <<'PY'
import os, pty, select, subprocess, sys, time
master, slave = pty.openpty()
p = subprocess.Popen(
    [sys.argv[1], "exec", "--warm", "cold", "-c",
     "import getpass; s = getpass.getpass('secret? '); print('len', len(s))"],
    stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
os.close(slave)
err = b""
deadline = time.time() + 150
while b"secret? " not in err and time.time() < deadline:
    r, _, _ = select.select([p.stderr], [], [], 1)
    if r:
        chunk = os.read(p.stderr.fileno(), 4096)
        if not chunk:
            break
        err += chunk
os.write(master, b"hunter2\n")
out, rest = p.communicate(timeout=60)
echo = b""
while True:
    r, _, _ = select.select([master], [], [], 0.5)
    if not r:
        break
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    echo += chunk
print("rc", p.returncode)
print("stdout", out)
print("terminal", echo)
print("echoed", b"hunter2" in echo)
PY
grep -q "len 7" "$T/pty" && grep -q "echoed False" "$T/pty"
ok $? "input(password=True) on a terminal reads the secret without echoing it"

# 3. A notebook's kernelspec name with escape sequences, in run's error
# (a kernel that is not installed: exit 3, a kernel failure).
$PY - "$T/nb.ipynb" <<'PY'
import json, sys
nb = {"cells": [], "metadata": {"kernelspec": {
    "name": "x\x1b]0;pwned\x07\x1b[2J\nfiles: fake", "display_name": "x"}},
      "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open(sys.argv[1], "w"))
PY
timeout -k 5 60 "$BIN" run -q "$T/nb.ipynb" -o "$T/o.ipynb" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 3 ] && ! grep -q "$ESC" "$T/err" && ! grep -q '^files: fake' "$T/err" &&
    grep -qF 'x\e]0;pwned\x07\e[2J\nfiles: fake' "$T/err"
ok $? "run: a notebook's kernelspec name is escaped in the error (exit $rc)"

# 4. run's progress lines (a cell's first line) and its final error (the
# exception's name and message, from the kernel) carry notebook text.
$PY - "$T/nb2.ipynb" <<'PY'
import json, sys
def code(src):
    return {"cell_type": "code", "id": "c%d" % len(src), "metadata": {},
            "execution_count": None, "outputs": [], "source": src}
nb = {"cells": [code("x = 1  # \x1b]0;pwned\x07\x1b[2J"),
                code("raise ValueError('\x1b]52;c;cHduZWQ=\x07\\nfiles: fake')")],
      "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open(sys.argv[1], "w"))
PY
timeout -k 5 180 "$BIN" run --warm cold "$T/nb2.ipynb" -o "$T/o2.ipynb" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] && ! grep -q "$ESC" "$T/err" && ! grep -q "$BEL" "$T/err" &&
    grep -qF 'x = 1  # \e]0;pwned\x07' "$T/err" &&
    grep -qF 'ValueError: \e]52;c;cHduZWQ=\x07\nfiles: fake' "$T/err" &&
    ! grep -q '^files: fake' "$T/err"
ok $? "run: a cell's first line and the exception it raised are escaped on our lines (exit $rc)"

# 5. Our status lines never continue a line the kernel left open.
timeout -k 5 180 "$BIN" exec --warm cold --timeout 2 -c \
    'import sys, time; sys.stdout.write("partial"); sys.stdout.flush(); time.sleep(60)' \
    >"$T/both" 2>&1
rc=$?
[ "$rc" = 6 ] && grep -q '^partial$' "$T/both" && grep -q '^jupyter-agent exec: ' "$T/both"
ok $? "exec: the timeout line starts on its own line after unterminated output (exit $rc)"

done_testing
