#!/bin/sh
# TAP: 'jupyter-agent sandbox' as a user drives it. Each line names what was
# tried and what must hold. Python inside is /usr/bin/python3.
# ENGINE=gvisor runs every box under gVisor (gvisor_cli.sh); a check that
# cannot apply there says why (tests/tap.sh: skip).
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
. "$(dirname "$0")/../tap.sh"
if [ "$ENGINE" = gvisor ] && [ "$(id -u)" != 0 ]; then
    echo "ok 1 # skip --engine gvisor needs root (runsc does)"
    echo "1..1"
    exit 0
fi
T=$(mktemp -d /tmp/ja-cli-test-XXXXXX)
trap 'rm -rf "$T"' EXIT
run() { # run the sandbox, stdout to $T/out, stderr to $T/err, status in $rc
    "$BIN" sandbox --quiet "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
}
show() { sed 's/^/# /' "$T/err" | head -5; }

"$BIN" sandbox --help >"$T/out" 2>&1
grep -q -- "--memory" "$T/out" && grep -q "exit status" "$T/out"
ok $? "--help documents the limits and the exit status"

run -- /bin/sh -c 'exit 3'
[ "$rc" = 3 ]
ok $? "the command's exit status passes through (3)"

run -- /bin/sh -c 'kill -TERM $$'
[ "$rc" = 143 ]
ok $? "a command killed by SIGTERM exits 143 (got $rc)"

run --memory 64M -- $PY -c 'x = []
while True: x.append(bytearray(1 << 20))'
[ "$rc" = 137 ] && grep -q "out of memory (limit 64 MiB)" "$T/err"
ok $? "a memory bomb under --memory 64M is OOM-killed: exit 137 and says so ($(cat "$T/err"))"

run --timeout 1 -- $PY -c 'import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True: pass'
[ "$rc" = 6 ] && grep -q "timed out after 1 s" "$T/err"
ok $? "a loop ignoring SIGINT/SIGTERM is killed by --timeout 1 (exit 6)"

run -- no-such-command-here
[ "$rc" = 2 ] && grep -q "not found" "$T/err"
ok $? "an unknown command is a usage error naming it"

run -- /usr/bin/no-such-binary
# Under gVisor the exec fails inside the box, in our relay: exit 127.
want=2
[ "$ENGINE" = gvisor ] && want=127
[ "$rc" = $want ] && grep -q "exec /usr/bin/no-such-binary: No such file or directory" "$T/err"
ok $? "a failed exec says which step failed (exit $rc): $(cat "$T/err")"

run --bind /no/such/dir -- /bin/true
[ "$rc" = 2 ]
ok $? "a --bind of a missing host path is refused"

run --memory lots -- /bin/true
[ "$rc" = 2 ] && grep -q -- "--memory" "$T/err"
ok $? "a malformed --memory is a usage error naming the flag"

echo "from stdin" | "$BIN" sandbox --quiet -- /bin/cat >"$T/out" 2>"$T/err"
grep -q "from stdin" "$T/out"
ok $? "stdin passes through to the command"

OPENAI_API_KEY=sk-cli-test-secret ANTHROPIC_API_KEY=sk-ant-cli \
    "$BIN" sandbox --quiet -- /usr/bin/env >"$T/out" 2>&1
! grep -q "sk-cli-test-secret\|sk-ant-cli" "$T/out" && grep -q "^HOME=/home/user" "$T/out"
ok $? "API keys in the launcher's environment are not visible inside"

OPENAI_API_KEY=sk-cli-test-secret \
    "$BIN" sandbox --quiet --env OPENAI_API_KEY -- /usr/bin/env >"$T/out" 2>&1
rc=$?
! grep -q "sk-cli-test-secret" "$T/out" && [ "$rc" = 2 ] &&
    grep -q -- "--env-secret OPENAI_API_KEY" "$T/out"
ok $? "--env OPENAI_API_KEY is refused (exit 2) naming --env-secret; the key stays out"

if [ "$ENGINE" = gvisor ]; then
    # pid 1 is our relay, the box's user's: readable, but it holds the
    # box's environment only, never the launcher's.
    OPENAI_API_KEY=sk-cli-test-secret run -- /bin/sh -c 'tr "\0" "\n" </proc/1/environ'
    ! grep -q "sk-" "$T/out" && grep -q "^HOME=/home/user" "$T/out"
    ok $? "init (gVisor: our relay) holds the box's environment only, no launcher key"
else
    run -- /bin/sh -c 'cat /proc/1/environ'
    ! grep -q "sk-" "$T/out" && [ "$rc" != 0 ]
    ok $? "init's environment cannot be read from inside"
fi

echo "secret" >"$T/in.txt"
run --file "$T/in.txt:../../x" -- /bin/true
[ "$rc" = 2 ] && grep -q "\.\./\.\./x" "$T/err"
ok $? "an upload named ../../x is refused"

printf 'a,b\n1,2\n' >"$T/data.csv"
run --file "$T/data.csv" --keep-workspace "$T/kept" -- /bin/sh -c \
    'cat data.csv > copy.csv; ln -s /etc/passwd link; mkfifo fifo; echo made > made.txt'
[ -f "$T/kept/copy.csv" ] && [ -f "$T/kept/made.txt" ] && [ ! -e "$T/kept/link" ] &&
    [ ! -e "$T/kept/fifo" ] && { grep -q "skipped 2 unsafe" "$T/err" ||
    # gVisor keeps a FIFO in the Sentry: it never reaches the workspace
    { [ "$ENGINE" = gvisor ] && grep -q "skipped 1 unsafe entry: 'link'" "$T/err"; }; }
ok $? "--file goes in, --keep-workspace brings regular files out and skips a symlink and a FIFO"

# The network, names and ptrace, in one box (a gVisor box costs a second).
run -- $PY -c 'import ctypes, os, socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("192.0.2.1", 80))
    print("net: connected")
except OSError as e:
    print("net:", e.strerror)
try:
    socket.getaddrinfo("example.com", 443)
    print("dns: resolved")
except socket.gaierror:
    print("dns: gaierror")
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(101, 16, 1, 0, 0)  # ptrace(PTRACE_ATTACH, 1)
print("ptrace:", r, os.strerror(ctypes.get_errno()))'
# Landlock (ABI >= 4) refuses the connect first; without it the network
# namespace has no route out (gVisor: unreachable, or no route to host).
grep -Eq "^net: (Permission denied|Network is unreachable|No route to host)$" "$T/out"
ok $? "python cannot reach the network (192.0.2.1: $(grep "^net:" "$T/out"))"
grep -q "^dns: gaierror$" "$T/out"
ok $? "python cannot resolve names (socket.gaierror)"
grep -q "^ptrace: -1 Operation not permitted$" "$T/out"
ok $? "python's ptrace via ctypes is refused with EPERM (a readable error)"

run --disk 4M -- /bin/sh -c 'dd if=/dev/zero of=/mnt/data/big bs=1M count=16 2>&1; ls -l /mnt/data/big'
grep -q "No space left on device" "$T/out"
ok $? "dd into /mnt/data stops at --disk 4M with ENOSPC"

# The launcher dies: the box dies with it.
# Its run dir goes under $T (via XDG_RUNTIME_DIR) so the cleanup is ours.
token="ja-cli-orphan-$$"
chmod 0711 "$T"
mkdir -m 0711 "$T/x"
# Under gVisor the box's processes are not host processes: runsc's are,
# named by the run dir under $T/x in their command lines.
# runsc takes seconds to start and to go on a loaded machine: wait longer.
tries=50
[ "$ENGINE" = gvisor ] && token="$T/x/" tries=300
XDG_RUNTIME_DIR="$T/x" "$BIN" sandbox --quiet -- $PY -c 'import time; time.sleep(300)' "$token" >/dev/null 2>&1 &
launcher=$!
i=0
while [ $i -lt $tries ] && ! pgrep -f "$token" >/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
pgrep -f "$token" >/dev/null
seen=$?
kill -KILL $launcher
wait $launcher 2>/dev/null
i=0
while [ $i -lt $tries ] && pgrep -f "$token" >/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
[ "$seen" = 0 ] && ! pgrep -f "$token" >/dev/null
ok $? "SIGKILL of the launcher kills the sandboxed process"
find /sys/fs/cgroup -maxdepth 8 -type d -path '*jupyter-agent*' \
    -name "$launcher-*" -exec rmdir {} + 2>/dev/null

# Ctrl-C reaches the command (forwarded by the launcher and init).
"$BIN" sandbox --quiet -- $PY -c 'import sys, time
print("ready", flush=True)
try:
    time.sleep(30)
except KeyboardInterrupt:
    sys.exit(42)' >"$T/out" 2>&1 &
launcher=$!
i=0
while [ $i -lt 100 ] && ! grep -q ready "$T/out"; do
    sleep 0.1
    i=$((i + 1))
done
kill -INT $launcher
wait $launcher
rc=$?
[ "$rc" = 42 ]
ok $? "SIGINT to the launcher raises KeyboardInterrupt inside (exit 42, got $rc)"

"$BIN" sandbox --print-policy | $PY -c 'import json, sys
p = json.load(sys.stdin)
assert p["memory_bytes"] == 2 << 30 and p["network"] is False'
ok $? "--print-policy prints the policy as JSON"

if [ "$ENGINE" = gvisor ]; then
    skip "--seccomp-table, --seccomp-audit (sandbox, exec), EPERM outside the allow list: $GV_SENTRY"
    skip "--landlock-rules: gVisor boxes run without Landlock; the Sentry, not the host kernel, answers every open"
    done_testing
    exit
fi
"$BIN" sandbox --seccomp-table | $PY -c 'import json, sys
t = json.load(sys.stdin)
assert any(r["syscall"] == "ptrace" and r["action"] == "EPERM" for r in t)
assert any(r["syscall"] == "read" and r["action"] == "ALLOW" for r in t)
assert all(r["reason"] for r in t)'
ok $? "--seccomp-table prints the allow list and the deny rows, each with a reason, as JSON"

"$BIN" sandbox --seccomp-audit -- $PY -c 'import ctypes
print(ctypes.CDLL(None).syscall(139, 3) > 0)' >"$T/out" 2>"$T/err"
grep -q True "$T/out" && grep -q "seccomp audit: the allow list lacks sysfs" "$T/err"
ok $? "sandbox --seccomp-audit lets a call outside the allow list through and names it"

"$BIN" sandbox -- $PY -c 'import ctypes, os
print(ctypes.CDLL(None, use_errno=True).syscall(139, 3), ctypes.get_errno())' >"$T/out" 2>"$T/err"
grep -q -- "-1 1" "$T/out"
ok $? "without --seccomp-audit the same call fails with EPERM"

"$BIN" exec --warm cold --seccomp-audit -c 'import ctypes
print(ctypes.CDLL(None).syscall(139, 3) > 0)' >"$T/out" 2>"$T/err"
grep -q True "$T/out" && grep -q "seccomp audit: the allow list lacks sysfs" "$T/err"
ok $? "exec --seccomp-audit reports the call from a real sandboxed ipykernel"

"$BIN" sandbox --landlock-rules | $PY -c 'import json, sys
d = json.load(sys.stdin)
assert d["abi"] == 0 or ("read-write /mnt/data" in d["in_force"] and
                         any(r[0] == "/usr" for r in d["rules"]))'
ok $? "--landlock-rules prints the Landlock rules this kernel enforces"

done_testing
