#!/bin/sh
# TAP: --env NAME passes a variable into the box unless its name looks
# like a secret (whole words: GIT_AUTHOR_NAME and PASSAGE_DIR are not);
# a refused name is a usage error saying which word and what to do, and
# --env-secret NAME passes one on purpose. Through exec (the session
# flags) and the sandbox command alike.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
. "$(dirname "$0")/../tap.sh"
session_tmpdir env
export GIT_AUTHOR_NAME=Ada PASSAGE_DIR=/passages MY_TOKEN=t0k-value

run sandbox --quiet --env GIT_AUTHOR_NAME --env PASSAGE_DIR -- /usr/bin/env
[ "$rc" = 0 ] && grep -qx 'GIT_AUTHOR_NAME=Ada' "$T/out" &&
    grep -qx 'PASSAGE_DIR=/passages' "$T/out"
ok $? "sandbox --env GIT_AUTHOR_NAME --env PASSAGE_DIR passes both (exit $rc)"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

run exec --warm cold --env GIT_AUTHOR_NAME \
    -c 'import os; print(os.environ.get("GIT_AUTHOR_NAME"))'
[ "$rc" = 0 ] && [ "$(cat "$T/out")" = Ada ]
ok $? "exec --env GIT_AUTHOR_NAME reaches the kernel (exit $rc)"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

run sandbox --quiet --env MY_TOKEN -- /usr/bin/env
[ "$rc" = 2 ] && ! grep -q t0k-value "$T/out" &&
    grep -q "MY_TOKEN" "$T/err" && grep -q "'TOKEN'" "$T/err" &&
    grep -q -- "--env-secret MY_TOKEN" "$T/err"
ok $? "sandbox --env MY_TOKEN is refused (exit 2, got $rc) naming the word and --env-secret"
[ "$rc" = 2 ] || diag "$T/out" "$T/err"

run exec --warm cold --env MY_TOKEN -c 'print(1)'
[ "$rc" = 2 ] && grep -q -- "--env-secret MY_TOKEN" "$T/err"
ok $? "exec --env MY_TOKEN is refused the same way (exit 2, got $rc)"

run sandbox --quiet --env-secret MY_TOKEN -- /usr/bin/env
[ "$rc" = 0 ] && grep -qx 'MY_TOKEN=t0k-value' "$T/out"
ok $? "sandbox --env-secret MY_TOKEN passes it on purpose (exit $rc)"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"

done_testing
