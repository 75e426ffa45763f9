#!/bin/sh
# TAP: the box's PATH has `python` (the box's python3) and a `pip` that
# says where packages come from, so `!python script.py` in a notebook and
# model-written `pip install` behave (issue 29, item 17b); the directory is
# read-only and nothing on the host changes.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-boxpy-XXXXXX)
chmod 711 "$T"
trap 'rm -rf "$T"' EXIT
export XDG_RUNTIME_DIR="$T"
unset JUPYTER_AGENT_SERVE_SOCKET
run() {
    "$BIN" "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
}
had_python=$(ls /usr/bin/python 2>/dev/null)

run exec --warm cold -c 'open("/mnt/data/s.py", "w").write("import sys; print(\"script says\", 6 * 7, sys.version_info[0])\n")
!cd /mnt/data && python s.py'
[ "$rc" = 0 ] && grep -q "script says 42 3" "$T/out"
ok $? "!python script.py runs the script with the box's python3"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

run exec --warm cold -c 'import subprocess, sys
r = subprocess.run(["python", "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
print("exe", r.stdout.strip(), r.returncode)'
grep -q "exe .*python" "$T/out" && ! grep -q "exe  " "$T/out"
ok $? "subprocess.run(['python', ...]) finds python on PATH"

run exec --warm cold -c 'import subprocess
r = subprocess.run(["pip", "install", "requests"], capture_output=True, text=True)
print("rc", r.returncode)
print(r.stderr)'
grep -q "^rc 1" "$T/out" && grep -q "no network" "$T/out" &&
    grep -q -- "--packages DIR --install NAME" "$T/out" &&
    grep -q "manifest sign" "$T/out"
ok $? "pip install fails with where packages come from (signed --packages, --install)"
grep -q "externally-managed" "$T/out"
[ $? != 0 ]
ok $? "... not Debian's externally-managed-environment text"

run exec --warm cold -c '!pip list 2>/dev/null | head -3; echo "pip3: $(pip3 --version | cut -c1-4)"'
grep -q "pip3: pip " "$T/out" && grep -qi "package" "$T/out"
ok $? "pip list and pip3 --version still answer"

run exec --warm cold -c 'import os
try:
    open("/opt/jupyter-agent/bin/evil", "w")
    print("WROTE")
except OSError as e:
    print("refused", e.errno)
try:
    os.unlink("/opt/jupyter-agent/bin/pip")
    print("REMOVED")
except OSError as e:
    print("refused", e.errno)'
! grep -q "WROTE\|REMOVED" "$T/out" && [ "$(grep -c refused "$T/out")" = 2 ]
ok $? "the bin dir is read-only: nothing can be added or removed"
[ "$(ls /usr/bin/python 2>/dev/null)" = "$had_python" ]
ok $? "the host's /usr is untouched"

done_testing
