#!/bin/sh
# TAP: exec and run exit without waiting for their kernel to die, and still
# leave nothing behind: their output is complete when they exit, and within
# a few seconds no process, cgroup or run dir of theirs remains (a detached
# reaper removes a cold box; the serve daemon removes a warm one).
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-teardown-XXXXXX)
chmod 711 "$T" # the box user must reach the run dirs made in here
SERVE_PID=
cleanup() {
    [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID"
    rm -rf "$T"
}
trap cleanup EXIT
# Run dirs go to $XDG_RUNTIME_DIR; no serve daemon listens there unless we
# start one. The marker finds every process that inherited our environment
# (the command itself, its reaper).
export XDG_RUNTIME_DIR="$T" HOME="$T" JA_TEARDOWN_MARK="$T"
unset JUPYTER_AGENT_SERVE_SOCKET

# What command pid $1 left behind, one line each; empty when nothing.
leftovers() {
    ls -d "$T"/ja-sb-* 2>/dev/null
    find /sys/fs/cgroup -maxdepth 5 -type d -name "$1-*" 2>/dev/null
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}
        p=${p%/environ}
        [ "$p" = $$ ] || [ "$p" = "$SERVE_PID" ] && continue
        if (tr '\0' '\n' <"$e") 2>/dev/null | grep -qx "JA_TEARDOWN_MARK=$T"; then
            echo "process $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"
        fi
    done
}

# Poll up to 15 s for leftovers of pid $1 to go; prints what remains.
settle() {
    i=0
    while [ $i -lt 150 ]; do
        left=$(leftovers "$1")
        [ -z "$left" ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    echo "$left" | sed 's/^/# left behind: /'
    return 1
}

json_has() { # FILE PYTHON-EXPR over j: holds when the JSON parses and EXPR
    "$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}

# OUT ARGS...: run the CLI with stdout to OUT; sets $pid (the CLI's own:
# it names its boxes' cgroups) and $rc.
run_cli() {
    out=$1
    shift
    "$BIN" "$@" >"$out" 2>"$T/err" </dev/null &
    pid=$!
    wait $pid
    rc=$?
}

run_cli "$T/out.json" exec --warm cold --json -c 'print(6 * 7)'
[ "$rc" = 0 ] && json_has "$T/out.json" \
    'j["status"] == "ok" and j["outputs"][0]["text"] == "42\n"'
ok $? "exec --json exits 0 with its JSON complete on stdout (cold box)"
[ "$rc" = 0 ] || diag "$T/err"
settle $pid
ok $? "after a cold exec no process, cgroup or run dir of it remains"

run_cli "$T/out.txt" exec --warm cold -c 'import subprocess
subprocess.Popen(["sleep", "600"])
print("spawned")'
[ "$rc" = 0 ] && grep -q spawned "$T/out.txt"
ok $? "exec whose code leaves a child process running exits 0 with its output"
settle $pid
ok $? "the child process the code left running is gone with the box"

cat >"$T/nb.ipynb" <<'EOF'
{"cells": [{"cell_type": "code", "execution_count": null, "id": "a1",
  "metadata": {}, "outputs": [], "source": "print(sum(range(10)))"}],
 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
  "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
EOF
run_cli "$T/run.out" run "$T/nb.ipynb" -o "$T/nb.out.ipynb" --warm cold
[ "$rc" = 0 ] && json_has "$T/nb.out.ipynb" \
    '"".join(j["cells"][0]["outputs"][0]["text"]) == "45\n"'
ok $? "run exits 0 with the executed notebook written"
settle $pid
ok $? "after run no process, cgroup or run dir of it remains"

run_cli "$T/keep.txt" exec --warm cold --keep-workspace "$T/kept" -c \
    'f = open("/mnt/data/unclosed.txt", "w"); f.write("flushed at exit")'
[ "$rc" = 0 ] && grep -q "flushed at exit" "$T/kept/unclosed.txt"
ok $? "--keep-workspace still shuts the kernel down gracefully first (an unclosed file is flushed)"
settle $pid
ok $? "after exec --keep-workspace nothing of it remains"

# A timeout whose interrupt is ignored kills the kernel; exec exits right
# after, so it must not start a new one first. Kernel starts are counted
# by an IPython startup file (a plain kernel reads $HOME/.ipython).
mkdir -p "$T/.ipython/profile_default/startup"
printf 'open("%s/starts", "a").write("start\\n")\n' "$T" \
    >"$T/.ipython/profile_default/startup/00-count.py"
STUCK='import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("stuck", flush=True)
time.sleep(120)'
run_cli "$T/stuck.txt" exec --no-sandbox --timeout 1 -c "$STUCK"
[ "$rc" = 6 ] && grep -q stuck "$T/stuck.txt" && grep -q "killed" "$T/err" &&
    ! grep -q "restart" "$T/err"
ok $? "exec after a timeout the interrupt could not end exits 6, the kernel killed, not restarted"
[ "$(cat "$T/starts" 2>/dev/null)" = start ]
ok $? "that exec started exactly one kernel (no restart before the exit)"
[ "$(cat "$T/starts" 2>/dev/null)" = start ] || echo "# kernel starts: $(wc -l <"$T/starts")"
settle $pid
ok $? "after that exec no process of it remains"
rm -f "$T/starts"
"$PY" -c 'import json, sys
cell = {"cell_type": "code", "execution_count": None, "id": "s1",
        "metadata": {}, "outputs": [], "source": sys.argv[1]}
json.dump({"cells": [cell], "metadata": {"kernelspec": {"name": "python3",
    "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}, open(sys.argv[2], "w"))' \
    "$STUCK" "$T/stuck.ipynb"
run_cli "$T/run-stuck.txt" run --no-sandbox --timeout 1 "$T/stuck.ipynb" \
    -o "$T/stuck.out.ipynb"
[ "$rc" = 6 ] && [ "$(cat "$T/starts" 2>/dev/null)" = start ]
ok $? "run stopped by such a timeout exits 6 having started exactly one kernel"
[ "$rc" = 6 ] || diag "$T/err"
settle $pid
ok $? "after that run no process of it remains"
rm -rf "$T/.ipython" "$T/starts"
run_cli "$T/stuck.txt" exec --warm cold --timeout 1 -c "$STUCK"
[ "$rc" = 6 ] && grep -q "killed" "$T/err" && ! grep -q "restart" "$T/err"
ok $? "the same in a sandbox: exits 6, the kernel killed, not restarted"
settle $pid
ok $? "after that exec no process, cgroup or run dir of it remains"

# Through serve: the daemon owns the box; exec hangs up and exits, and the
# daemon removes the box it handed out.
mkdir -m 700 "$T/serve"
SOCK="$T/serve/serve.sock"
# --no-factory: the factory's own box would be among the run dirs below.
"$BIN" serve --pool 1 --no-factory --socket "$SOCK" >"$T/serve.out" 2>"$T/serve.err" &
SERVE_PID=$!
ready() {
    "$BIN" serve --status --socket "$SOCK" 2>/dev/null >"$T/status.json" &&
        json_has "$T/status.json" 'j["ready"] >= 1'
}
i=0
until ready || [ $i -ge 300 ]; do
    sleep 0.2
    i=$((i + 1))
done
export JUPYTER_AGENT_SERVE_SOCKET="$SOCK"
for round in 1 2; do
    until ready || [ $i -ge 600 ]; do
        sleep 0.2
        i=$((i + 1))
    done
    before=$(ls -d "$T"/ja-sb-* 2>/dev/null)
    run_cli "$T/warm$round.json" exec --warm pool --json -c 'print(6 * 7)'
    [ "$rc" = 0 ] && json_has "$T/warm$round.json" \
        'j["status"] == "ok" and j["outputs"][0]["text"] == "42\n"'
    ok $? "exec --warm pool --json (round $round) exits 0 with its JSON complete"
    [ "$rc" = 0 ] || diag "$T/err"
    # The box's run dir ja-sb-X and its cgroup <serve pid>-X must go.
    w=0
    while :; do
        left=
        for d in $before; do
            [ -e "$d" ] && left="$left $d"
            left="$left$(find /sys/fs/cgroup -maxdepth 5 -type d \
                -name "$SERVE_PID-${d##*ja-sb-}" 2>/dev/null)"
        done
        [ -z "$left" ] || [ $w -ge 60 ] && break
        sleep 1
        w=$((w + 1))
    done
    [ -n "$before" ] && [ -z "$left" ]
    ok $? "serve removes the box exec handed back (round $round): no run dir, cgroup or process left"
    [ -z "$left" ] || echo "# left behind: $left"
done

done_testing
