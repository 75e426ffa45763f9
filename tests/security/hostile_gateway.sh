#!/bin/sh
# TAP: `jupyter-agent exec --gateway` against a gateway that misbehaves
# (tests/gateway/hostile_gateway.py; tests/interop/
# test_hostile_gateway_server.py checks that each mode really does). For
# each mode: the command ends by itself (no hang: an outer timeout never has
# to kill it), with the documented exit code and an error naming what the
# user sees, a peak RSS within the per-message cap (256 MiB, as for a local
# kernel, plus 64 MiB) although the server sends more (an endless stream),
# and no output that was not addressed to the execution. A frame whose
# announced length passes the cap (600 MiB of a frame announcing 1 GiB, a
# 300 MiB message) is refused on that announcement and read past without
# being stored: the peak RSS stays within 64 MiB of the `normal` run's. As
# for a hostile local kernel, a message that is too large or malformed (bad
# v1 offsets, unknown channel, not JSON) is dropped, so the execution ends
# at --timeout (exit 6), and the error counts what was refused, by kind; a
# refused or broken connection is exit 3 (README "Exit codes"). The
# `normal` mode first shows the same command succeeds against the same
# server when it behaves.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=${PYTHON:-/usr/bin/python3}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-hostile-gw-XXXXXX)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
export HOME="$T/home" XDG_RUNTIME_DIR="$T/run"
unset JUPYTER_GATEWAY_URL JUPYTER_GATEWAY_AUTH_TOKEN
mkdir -p "$HOME" "$T/run"
chmod 700 "$T/run"
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOKEN_FILE=$T/token # shared by the jobs, whose $T is their own
printf '%s\n' "$TOKEN" >"$TOKEN_FILE"
# Peak RSS allowed to the client, KiB: the 256 MiB cap on one message plus
# 64 MiB; the server sends 300 MiB to 600 MiB and more.
RSS_CAP_KB=${RSS_CAP_KB:-327680}
# An ASan build (make asan) keeps up to 256 MiB of freed memory in its
# quarantine before reusing it, and adds an eighth for its shadow memory:
# the flood and dense-JSON caps allow for that much more (asan_kb).
ASAN_BUILD=
ldd "$BIN" 2>/dev/null | grep -q libasan && ASAN_BUILD=1
asan_kb() { # cap in KiB -> the cap this build is held to
    if [ -n "$ASAN_BUILD" ]; then
        echo $((($1 + 262144) * 9 / 8))
    else
        echo "$1"
    fi
}
RSS_CAP_KB=$(asan_kb "$RSS_CAP_KB")
# For frames refused on their announced length: the `normal` run's peak
# plus 64 MiB (buffering up to the cap before refusing needs 256 MiB).
BASE_RSS_KB=
EXEC_TIMEOUT=5

start_server() { # mode protocol
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    : >"$T/port"
    "$PY" tests/gateway/hostile_gateway.py --mode "$1" --protocol "$2" \
        --token "$TOKEN" --lifetime 300 >"$T/port" 2>"$T/server.log" &
    server=$!
    i=0
    while [ ! -s "$T/port" ] && [ $i -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    port=$(cat "$T/port")
}

run() { # bound: stdout $T/out, stderr $T/err, $rc, $secs, $rss (KiB)
    bound=$1
    shift
    start=$(date +%s)
    /usr/bin/time -f %M -o "$T/rss" timeout -k 5 "$bound" "$BIN" exec \
        --gateway "http://127.0.0.1:$port" --gateway-token-file "$TOKEN_FILE" \
        --timeout $EXEC_TIMEOUT "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    secs=$(($(date +%s) - start))
    rss=$(tail -n 1 "$T/rss" 2>/dev/null)
    case "$rss" in '' | *[!0-9]*) rss=0 ;; esac
}

# The modes are independent (each has its own server, on its own port) and
# their time is spent waiting for a timeout, so they run as background jobs,
# HOSTILE_JOBS at once, each in its own directory; `collect` prints their
# TAP lines in the order they were started, numbered as usual.
HOSTILE_JOBS=${HOSTILE_JOBS:-4}
njobs=0
running=""
spawn() { # function args...
    while :; do
        live=""
        for p in $running; do
            kill -0 "$p" 2>/dev/null && live="$live $p"
        done
        running=$live
        [ "$(echo $running | wc -w)" -lt "$HOSTILE_JOBS" ] && break
        sleep 0.2
    done
    njobs=$((njobs + 1))
    d="$T/job$njobs"
    mkdir -p "$d"
    (
        T=$d
        server=
        ok() { printf '@@ok %s %s\n' "$1" "$2"; }
        "$@"
        [ -n "$server" ] && kill "$server" 2>/dev/null
    ) >"$d/tap" 2>&1 &
    echo $! >"$d/pid"
    running="$running $!"
}
collect() {
    i=1
    while [ $i -le $njobs ]; do
        wait "$(cat "$T/job$i/pid")"
        while IFS= read -r line; do
            case "$line" in
            "@@ok "*)
                rest=${line#@@ok }
                ok "${rest%% *}" "${rest#* }"
                ;;
            *) printf '%s\n' "$line" ;;
            esac
        done <"$T/job$i/tap"
        i=$((i + 1))
    done
    njobs=0
}

# mode protocol want-rc error-regex bound-seconds what
check() {
    mode=$1 proto=$2 want=$3 re=$4 bound=$5 what=$6
    start_server "$mode" "$proto"
    if [ -z "$port" ]; then
        ok 1 "$mode ($proto): the hostile gateway started"
        diag "$T/server.log"
        return
    fi
    run "$bound" -c 'print("hello")'
    # The bounds below mean something only if the client met the hostile
    # server: it must at least have asked for a kernel.
    reached=1
    grep -q '^hostile_gateway: POST /api/kernels' "$T/server.log" && reached=0
    [ $reached = 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]
    ok $? "$mode ($proto): exec ends by itself within ${bound} s, no hang (took ${secs} s)"
    if [ "$rc" = "$want" ] && grep -Eqi -- "$re" "$T/err"; then
        ok 0 "$mode ($proto): $what: exit $want and an error naming it"
    else
        ok 1 "$mode ($proto): $what: exit $want and an error naming it"
        echo "# exit $rc (wanted $want), stderr should match /$re/"
        diag "$T/err"
        tail -n 5 "$T/server.log" | diag
    fi
    cap=$RSS_CAP_KB
    case "$mode" in
    oversized-*) cap=$((${BASE_RSS_KB:-0} + 65536)) ;;
    esac
    [ $reached = 0 ] && [ "$rss" -gt 0 ] && [ "$rss" -lt "$cap" ]
    ok $? "$mode ($proto): peak RSS stays bounded (${rss} KiB < ${cap} KiB)"
    case "$mode" in
    forged-parent | wrong-channel)
        [ $reached = 0 ] && ! grep -Eq 'FORGED|WRONG' "$T/out"
        ok $? "$mode ($proto): output not addressed to this execution is not printed"
        ;;
    esac
}

for proto in v1 legacy; do
    start_server normal "$proto"
    run 120 -c 'print("hello")'
    [ "$rc" = 0 ] && grep -qx hello "$T/out"
    ok $? "normal ($proto): exec through a well-behaved gateway prints hello (exit $rc)"
    [ "$rc" = 0 ] || diag "$T/err"
    [ -z "$BASE_RSS_KB" ] || [ "$rss" -gt "$BASE_RSS_KB" ] && BASE_RSS_KB=$rss
done

# A busy server that hangs up the first handshakes unanswered (as
# jupyter-server did under 20 sessions at once): the client tries again
# within its start-up time and the cell runs.
ws_drop() {
    start_server ws-drop v1
    run 120 -c 'print("hello")'
    [ "$rc" = 0 ] && grep -qx hello "$T/out" &&
        [ "$(grep -c 'ws-drop: hanging up' "$T/server.log")" = 2 ]
    ok $? "ws-drop (v1): two handshakes hung up, the third opens and exec prints hello (exit $rc)"
    [ "$rc" = 0 ] || diag "$T/err"
}
spawn ws_drop

# A handshake the server holds without answering (jupyter-server waits for
# the kernel's kernel_info reply, up to 60 s) is dropped after 30 s and
# tried again, well inside the start-up time: the cell runs.
ws_hang_once() {
    start_server ws-hang-once v1
    export JUPYTER_AGENT_LOG=info # the retry is logged at info
    run 120 -c 'print("hello")'
    unset JUPYTER_AGENT_LOG
    [ "$rc" = 0 ] && grep -qx hello "$T/out" &&
        grep -q 'no answer to the handshake in 30 s' "$T/err"
    ok $? "ws-hang-once (v1): the unanswered handshake is dropped after 30 s, the next opens and exec prints hello (exit $rc, ${secs} s)"
    [ "$rc" = 0 ] || diag "$T/err"
}
spawn ws_hang_once

B=60 # seconds: --timeout 5 plus the 5 s grace, plus start-up on a busy machine
# What the error must add to "timed out after 5 s": the refused messages,
# by kind.
refused='timed out after 5 s.*the Jupyter server at http://127\.0\.0\.1:[0-9]+ sent'
spawn check oversized-frame v1 6 "$refused 1 message we refused \(oversized: 1\)" $B \
    "a frame announcing 1 GiB (refused on its length)"
spawn check oversized-frame legacy 6 "$refused 1 message we refused \(oversized: 1\)" $B \
    "a text frame announcing 1 GiB (refused on its length)"
spawn check oversized-message v1 6 "$refused 1 message we refused \(oversized: 1\)" $B \
    "a 300 MiB message (refused on its length)"
spawn check offsets-past-end v1 6 "$refused 1 message we refused \(malformed: 1\)" $B \
    "v1 offsets past the end of the frame (dropped)"
spawn check offsets-decreasing v1 6 "$refused 1 message we refused \(malformed: 1\)" $B \
    "v1 offsets that go backwards (dropped)"
spawn check offsets-huge-count v1 6 "$refused 1 message we refused \(malformed: 1\)" $B \
    "a v1 frame announcing 2**60 offsets (dropped)"
spawn check wrong-channel v1 6 "$refused 4 messages we refused \(unknown channel: 4\)" $B \
    "replies on channels that do not exist (dropped)"
spawn check wrong-channel legacy 6 "$refused 4 messages we refused \(unknown channel: 4\)" $B \
    "replies on channels that do not exist (dropped)"
spawn check invalid-json v1 6 "$refused 1 message we refused \(malformed: 1\)" $B \
    "a header that is not JSON (dropped)"
spawn check invalid-json legacy 6 "$refused 1 message we refused \(malformed: 1\)" $B \
    "a message that is not JSON (dropped)"
spawn check flood v1 6 'timed out|timeout' $B "an iopub stream that never ends"
spawn check flood legacy 6 'timed out|timeout' $B "an iopub stream that never ends"
spawn check never-idle v1 6 'timed out|timeout|idle' $B "a status that never goes idle"
spawn check forged-parent v1 6 'timed out|timeout' $B "replies to another request"
spawn check ws-close v1 3 'closed|connection|websocket' $B "the WebSocket closed mid-cell"
spawn check ws-close legacy 3 'closed|connection|websocket' $B "the WebSocket closed mid-cell"
spawn check http-403 v1 3 'max kernels per user limit' $B "EG's resource-limit 403"
spawn check rest-huge v1 3 'too large' $B "a 64 MiB REST answer (over the 4 MiB cap)"
spawn check workdir-relative v1 3 'working directory is not a path' $B "a relative working directory (refused)"
spawn check workdir-nul v1 3 'working directory is not a path' $B "a working directory with a NUL (refused)"
spawn check workdir-not-hex v1 3 'working directory is not a path' $B "a working directory not in hex (refused)"
spawn check slowloris v1 3 'timed out|timeout|127\.0\.0\.1' 120 "an answer that never ends"
spawn check ws-drop-dead v1 3 'reports the kernel dead' 30 "handshakes hung up on a kernel the server reports dead (no retries until the start-up deadline)"
spawn check ws-hang v1 3 'timed out|timeout|websocket' 120 "a handshake never answered"

# A redirect of the WebSocket handshake is a refusal: the token never goes
# to the second host (libwebsockets follows 3xx unless told not to, with
# our handshake headers); the second host gets no connection at all.
ws_redirect() { # protocol
    check ws-redirect "$1" 3 'redirect \(HTTP 302\).*not followed' 30 \
        "a 302 on the WebSocket handshake (refused, not followed)"
    ! grep -q 'redirect target' "$T/server.log"
    ok $? "ws-redirect ($1): the second host got nothing (no connection, no token)"
    grep 'redirect target' "$T/server.log" | diag
}
for proto in v1 legacy; do
    spawn ws_redirect $proto
done

# A 400 on the handshake is the server's final word: one try, not a retry
# for the whole start-up window (60 s), and well within --timeout 5.
ws_400() {
    check ws-400 v1 3 'refused the WebSocket.*HTTP 400' 30 "a 400 on the WebSocket handshake"
    n400=$(grep -c 'ws-400: refusing handshake' "$T/server.log")
    [ "$n400" = 1 ] && [ "$secs" -le $EXEC_TIMEOUT ]
    ok $? "ws-400: one handshake, not retried ($n400 tries, ${secs} s <= --timeout $EXEC_TIMEOUT)"
}
spawn ws_400

# 48 MiB of [0,0,...] in one message, for the execution and for another
# parent: refused before jansson builds ~1 GiB of it; the cell's own
# output still arrives and the peak stays within twice what was received.
dense_json() { # protocol
    start_server dense-json "$1"
    run 120 --timeout 90 -c 'print("hello")'
    [ "$rc" = 0 ] && grep -qx hello "$T/out" && ! grep -q DENSE "$T/out"
    ok $? "dense-json ($1): the dense messages are refused, hello still printed (exit $rc)"
    [ "$rc" = 0 ] || diag "$T/err"
    cap=$(asan_kb $((${BASE_RSS_KB:-0} + 2 * 49152 + 32768)))
    [ "$rss" -gt 0 ] && [ "$rss" -lt "$cap" ]
    ok $? "dense-json ($1): peak RSS ${rss} KiB < the normal run's + 2 x 48 MiB + 32 MiB (${cap} KiB)"
}
for proto in v1 legacy; do
    spawn dense_json $proto
done
collect

done_testing
