#!/bin/sh
# TAP: the commands that start a session (exec, run, ask, kernel, mcp) parse
# their flags alike: --help exits 0 and documents --kernel and --timeout,
# an unknown flag is a usage error (exit 2) that points to the command's
# help, a --timeout that is no duration is refused in one line, and
# --kernel/--timeout still reach the sandboxed kernel they start.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
. "$(dirname "$0")/../tap.sh"
T=$(mktemp -d /tmp/ja-cliflags-XXXXXX)
chmod 711 "$T" # the box user must reach the run dirs made in here
trap 'rm -rf "$T"' EXIT
# No serve pool, no API keys, no gateway: nothing outside this test counts.
export XDG_RUNTIME_DIR="$T" HOME="$T"
unset JUPYTER_AGENT_SERVE_SOCKET JUPYTER_GATEWAY_URL OPENAI_API_KEY \
    ANTHROPIC_API_KEY JUPYTER_AGENT_MODEL

run() {
    "$BIN" "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
}

for cmd in exec run ask kernel mcp; do
    run "$cmd" --help
    [ "$rc" = 0 ] && grep -q -- '--kernel NAME' "$T/out" &&
        grep -q -- '--timeout S' "$T/out"
    ok $? "'$cmd --help' exits 0 and documents --kernel NAME and --timeout S"
    [ "$rc" = 0 ] || diag "$T/err"

    expect 2 "jupyter-agent $cmd: see 'jupyter-agent $cmd --help'" \
        "'$cmd --no-such-flag' is a usage error (exit 2) naming '$cmd --help'" \
        -- "$cmd" --no-such-flag

    run "$cmd" --timeout abc
    [ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] &&
        grep -q "^jupyter-agent $cmd: .*'abc' is not a duration in seconds" \
            "$T/err"
    ok $? "'$cmd --timeout abc' is refused (exit 2) in one line saying why"
    [ "$rc" = 2 ] || diag "$T/out" "$T/err"
done

run exec --warm cold --kernel python3 --timeout 30 -c '1+1'
[ "$rc" = 0 ] && [ "$(cat "$T/out")" = 2 ]
ok $? "exec --kernel python3 --timeout 30 -c '1+1' prints 2 from a sandboxed kernel"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

run exec --warm cold --kernel no-such-kernel -c '1+1'
[ "$rc" != 0 ] && grep -q no-such-kernel "$T/err"
ok $? "exec --kernel no-such-kernel fails naming the kernelspec"
[ "$rc" != 0 ] || diag "$T/out" "$T/err"

run exec --warm cold --timeout 1 -c 'import time; time.sleep(120)'
[ "$rc" = 6 ]
ok $? "exec --timeout 1 stops code that runs longer with exit 6 (timeout)"
[ "$rc" = 6 ] || diag "$T/out" "$T/err"

cat >"$T/nb.ipynb" <<'NB'
{"cells": [{"cell_type": "code", "execution_count": null, "id": "a1",
  "metadata": {}, "outputs": [], "source": "print(1)"}],
 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
  "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
NB
run run "$T/nb.ipynb" -o "$T/nb.out.ipynb" --warm cold --kernel no-such-kernel
[ "$rc" != 0 ] && grep -q no-such-kernel "$T/err"
ok $? "run --kernel overrides the notebook's kernelspec (no-such-kernel fails)"
[ "$rc" != 0 ] || diag "$T/out" "$T/err"

done_testing
