#!/bin/sh
# The Python built into jupyter-agent (every *.py in a layer folder, see the
# Makefile's py_srcs) compiles, passes pyflakes, and is what the binary
# carries: Python's own tools check it, not a C compiler.
set -u
. tests/tap.sh
PY=${PYTHON:-/usr/bin/python3}
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export PYTHONDONTWRITEBYTECODE=1

files=$(ls agent/*.py agent/*/*.py notebook-io/*.py notebook-io/*/*.py \
    packages/*.py packages/*/*.py kernel-bridge/*.py kernel-bridge/*/*.py \
    sandbox/*.py sandbox/*/*.py common/*.py common/*/*.py 2>/dev/null)
[ -n "$files" ]
ok $? "the layers hold the Python they embed as .py files"
have_flakes=0
"$PY" -m pyflakes --version >/dev/null 2>&1 && have_flakes=1
for f in $files; do
    "$PY" -c 'import py_compile, sys
py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' \
        "$f" "$T/c.pyc" >"$T/out" 2>&1
    rc=$?
    ok $rc "$f compiles (py_compile with $PY)"
    [ $rc = 0 ] || diag "$T/out"
    if [ $have_flakes = 1 ]; then
        "$PY" -m pyflakes "$f" >"$T/out" 2>&1
        rc=$?
        ok $rc "$f has no pyflakes findings (undefined names, unused imports)"
        [ $rc = 0 ] || diag "$T/out"
    else
        echo "ok $((n + 1)) # skip pyflakes is not installed (python3-pyflakes)"
        n=$((n + 1))
    fi
    # The binary carries the file byte for byte (tools/embed, then a NUL);
    # a module no command calls yet (the linker leaves it out) must be in
    # its layer's library.
    lib="$(dirname "$BIN")/lib${f%%/*}.a"
    if [ -x "$BIN" ] && "$PY" - "$f" "$BIN" "$lib" <<'PYEOF'
import sys
src = open(sys.argv[1], 'rb').read() + b'\0'
binary = open(sys.argv[2], 'rb').read()
if src in binary:
    sys.exit(0)
try:
    sys.exit(0 if src in open(sys.argv[3], 'rb').read() else 1)
except OSError:
    sys.exit(1)
PYEOF
    then
        ok 0 "$f is built into $BIN (or $lib) unchanged"
    else
        ok 1 "$f is built into $BIN (or $lib) unchanged"
    fi
done

# And no Python left in C string literals: a line of a C file in a layer
# that starts a string with a Python statement (a one-line bootstrap such
# as `code[] = "import x"` does not start its line with the string).
c_files=$(ls agent/*.c agent/*/*.c notebook-io/*.c notebook-io/*/*.c \
    packages/*.c packages/*/*.c kernel-bridge/*.c kernel-bridge/*/*.c \
    sandbox/*.c sandbox/*/*.c common/*.c common/*/*.c 2>/dev/null)
# shellcheck disable=SC2086
grep -nE '^[[:space:]]*"[[:space:]]*(import [a-z]|from [a-z_.]+ import |def [a-z_]+\(|class [A-Za-z_]+[:(]|try:|except( [A-Z]|:)|print\()' \
    $c_files >"$T/out" 2>&1
[ $? = 1 ]
ok $? "no C file in a layer holds Python in string literals"
[ -s "$T/out" ] && diag "$T/out"
done_testing
