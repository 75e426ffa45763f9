#!/bin/sh
# CPU fairness under contention (issue 19): two sandboxed and two plain
# busy loops, each plain one in its own session (as a kernel started by
# jupyter_client or our plain launcher is, so each gets its own autogroup),
# run side by side for 12 s; prints the CPU seconds each got. Fair = the
# sandboxed and plain figures are alike. Measures, never asserts.
#
#   sh bench/cpu_fairness.sh [JUPYTER-AGENT-BINARY ...]   (default build/)
[ $# -gt 0 ] || set -- "${BUILD:-build}/jupyter-agent"
CODE='import time
t = time.time()
while time.time() - t < 12: pass
print("%.2f" % time.process_time())'
for BIN in "$@"; do
    T=$(mktemp -d)
    chmod 711 "$T" # the box user reaches the run dirs made in here
    for i in 1 2; do
        XDG_RUNTIME_DIR=$T "$BIN" sandbox --quiet --cpus 2 -- \
            /usr/bin/python3 -c "$CODE" >"$T/sb$i" &
    done
    for i in 1 2; do
        setsid -w /usr/bin/python3 -c "$CODE" >"$T/pl$i" &
    done
    wait
    echo "$BIN: CPU s in 12 s, sandboxed: $(cat "$T/sb1") $(cat "$T/sb2");" \
        "plain: $(cat "$T/pl1") $(cat "$T/pl2") (load $(cut -d' ' -f1 /proc/loadavg))"
    rm -rf "$T"
done
