# tap.sh: the shell side of tests/tap.h, sourced by tests/<suite>/*.sh.
#
#   ok STATUS "what must hold"       one line per guarantee (0 = holds)
#   diag FILE...                     show files as TAP comments
#   expect RC TEXT "what" -- ARGS    `run ARGS` (the script defines run: it
#                                    sets $rc and writes $T/out, $T/err);
#                                    holds when the exit code is RC and TEXT
#                                    appears in stdout or stderr
#   skip "what: why"                 "ok N # skip what: why" (a check that
#                                    cannot apply, and the reason)
#   done_testing                     "1..N", "N passed, N failed", status
#
# ENGINE=gvisor (or namespaces) runs a suite's boxes under that engine: it
# becomes JUPYTER_AGENT_ENGINE, the default of every box the binary makes
# (tests/tap.h: tap_engine). $ENGINE is "namespaces" when unset.
n=0
failed=0
if [ -n "${ENGINE:-}" ]; then
    export JUPYTER_AGENT_ENGINE="$ENGINE"
fi
ENGINE=${ENGINE:-namespaces}
GV_SENTRY="gVisor answers this call in the Sentry; the host seccomp filter is not the wall"

skip() {
    n=$((n + 1))
    echo "ok $n # skip $1"
}

ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=$((failed + 1))
    fi
}

diag() { sed 's/^/# /' "$@"; }

expect() {
    want=$1 text=$2 desc=$3
    shift 4
    run "$@"
    if [ "$rc" = "$want" ] && cat "$T/out" "$T/err" | grep -qF -- "$text"; then
        ok 0 "$desc"
    else
        ok 1 "$desc"
        echo "# exit $rc (wanted $want), looked for: $text"
        diag "$T/out" "$T/err"
    fi
}

done_testing() {
    echo "1..$n"
    echo "$((n - failed)) passed, $failed failed"
    [ "$failed" = 0 ]
}

# session_tmpdir NAME: $T, a new directory the box's user can pass
# (removed at exit), as HOME and XDG_RUNTIME_DIR, and none of the caller's
# serve pool, gateway, model or API keys: nothing outside the test counts.
session_tmpdir() {
    T=$(mktemp -d "/tmp/ja-$1-XXXXXX")
    chmod 711 "$T"
    trap 'rm -rf "$T"' EXIT
    export XDG_RUNTIME_DIR="$T" HOME="$T"
    unset JUPYTER_AGENT_SERVE_SOCKET JUPYTER_GATEWAY_URL OPENAI_API_KEY \
        ANTHROPIC_API_KEY JUPYTER_AGENT_MODEL
}

# run ARGS: $BIN with ARGS, at most 300 s, stdin from /dev/null; sets $rc
# and writes $T/out and $T/err. A script may define its own run instead.
run() {
    timeout -k 5 300 "$BIN" "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
}
