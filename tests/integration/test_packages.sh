#!/bin/sh
# Integration test (TAP): `--packages DIR --install NAME` installs signed
# wheels into a real sandboxed kernel, offline, with their dependencies from
# the manifest only; every refusal happens before any user code runs.
# Wheels are built here with /usr/bin/python3 zipfile (some deflated, some
# stored, as real wheels are), signed with `jupyter-agent manifest sign`.
set -u
. "$(dirname "$0")/../tap.sh"
J=${JUPYTER_AGENT_BIN:-$PWD/build/jupyter-agent}
PY=${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/test_packages.XXXXXX)
SERVER_PID=
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/home" "$T/none"
export HOME="$T/home"
export JUPYTER_AGENT_TRUSTED_KEYS="$T/none"

# run ARGS...: `jupyter-agent exec ARGS`; sets rc, output in $T/out, $T/err.
run() {
    "$J" exec "$@" >"$T/out" 2>"$T/err"
    rc=$?
}
# The user's code must not have run.
no_user_code() {
    ! grep -q "USER CODE RAN" "$T/out" "$T/err"
    ok $? "$1"
}

cat >"$T/mkwheel.py" <<'EOF'
# mkwheel.py OUTDIR DIST VERSION TAG COMPRESSION CODE [REQUIRES-DIST...]
import base64, hashlib, os, sys, zipfile
def b64(d):
    return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
out, dist, ver, tag, comp, code = sys.argv[1:7]
reqs = sys.argv[7:]
di = f"{dist}-{ver}.dist-info"
meta = (f"Metadata-Version: 2.1\nName: {dist}\nVersion: {ver}\n"
        "Summary: a test package built by test_packages.sh\n"
        + "".join(f"Requires-Dist: {r}\n" for r in reqs)
        + "\nLong description body.\nRequires-Dist: not-a-header\n")
files = {
    f"{dist}/__init__.py": (f"__version__ = {ver!r}\n" + code + "\n").encode(),
    f"{di}/METADATA": meta.encode(),
    f"{di}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
}
rec = [f"{k},sha256={b64(v)},{len(v)}" for k, v in files.items()] + [f"{di}/RECORD,,"]
files[f"{di}/RECORD"] = ("\n".join(rec) + "\n").encode()
method = zipfile.ZIP_DEFLATED if comp == "deflate" else zipfile.ZIP_STORED
with zipfile.ZipFile(os.path.join(out, f"{dist}-{ver}-{tag}.whl"), "w") as z:
    for k, v in files.items():
        z.writestr(zipfile.ZipInfo(k, (2020, 1, 1, 0, 0, 0)), v, method)
EOF
mk() { "$PY" "$T/mkwheel.py" "$@" || echo "Bail out! cannot build wheels with $PY"; }

# greet needs helper (1.5 satisfies it, 2.0 does not); its other
# dependencies sit behind an extra and a false marker and must be skipped.
mkdir "$T/wheels"
mk "$T/wheels" greet 1.0 py3-none-any deflate \
    'import helper
def f():
    return "hello from greet via helper " + helper.__version__' \
    'helper (<2,>=1.0)' 'pytest>=7; extra == "test"' \
    'importlib-metadata; python_version < "3.8"'
mk "$T/wheels" helper 1.5 py3-none-any stored 'pass'
mk "$T/wheels" helper 2.0 py3-none-any deflate 'pass'
mk "$T/wheels" oldie 1.0 cp27-cp27mu-linux_x86_64 stored 'pass'

"$J" manifest keygen -o "$T/a.key" --label ops-a >/dev/null 2>&1
"$J" manifest keygen -o "$T/b.key" --label ops-b >/dev/null 2>&1
sign() { # NAME KEY: a signed copy of the wheels in $T/NAME
    rm -rf "${T:?}/$1"
    cp -R "$T/wheels" "$T/$1"
    "$J" manifest sign --key "$T/$2.key" "$T/$1" >/dev/null 2>&1 ||
        echo "Bail out! manifest sign failed"
}
sign p a
A="--trust $T/a.key.pub"

# A loopback service on the host; the sandboxed kernel must never reach it.
# pip is pointed at it through every variable it would read on the host.
"$PY" - "$T/port" "$T/hits" <<'EOF' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("hit\n")
    c.close()
EOF
SERVER_PID=$!
i=0
while [ ! -s "$T/port" ] && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
done
PORT=$(cat "$T/port")
export PIP_INDEX_URL="http://127.0.0.1:$PORT/simple"
export PIP_FIND_LINKS="http://127.0.0.1:$PORT/links"
export http_proxy="http://127.0.0.1:$PORT" https_proxy="http://127.0.0.1:$PORT"

# --- install ----------------------------------------------------------------
# shellcheck disable=SC2086
run --packages "$T/p" $A --install greet -c "
import greet, helper, socket
print(greet.f())
print('helper at', helper.__file__)
try:
    socket.create_connection(('127.0.0.1', $PORT), timeout=3)
    print('NETWORK REACHED')
except OSError as e:
    print('network blocked:', type(e).__name__)
"
[ "$rc" = 0 ] && grep -qx "hello from greet via helper 1.5" "$T/out"
ok $? "--install greet: the package imports in the same session and works"
[ "$rc" = 0 ] || diag "$T/out" "$T/err"
grep -qx "helper at /mnt/data/.packages/helper/__init__.py" "$T/out"
ok $? "its dependency helper was installed too, into /mnt/data/.packages"
grep -qF "packages: installed greet 1.0, helper 1.5 (for greet 1.0) from $T/p (signed by key" "$T/err"
ok $? "the highest manifest version matching the specifier is chosen, and the install is reported on stderr"
[ "$rc" = 0 ]
ok $? "dependencies behind an extra or a false environment marker are not demanded"
# PermissionError: Landlock refuses TCP connect (ABI >= 4); without it the
# box's own network namespace refuses the connection.
grep -Eq "network blocked: (PermissionError|ConnectionRefusedError)" "$T/out" && ! grep -q "NETWORK REACHED" "$T/out"
ok $? "after the install the kernel still cannot reach a loopback service of the host"

# --- the location is per session ------------------------------------------------
# A second session, trusting the key through $JUPYTER_AGENT_TRUSTED_KEYS,
# installs only helper (a bare name: the highest version, 2.0).
mkdir -p "$T/tk" && cp "$T/a.key.pub" "$T/tk/"
JUPYTER_AGENT_TRUSTED_KEYS="$T/tk" "$J" exec --packages "$T/p" --install helper -c "
import helper
print('helper', helper.__version__)
import greet" >"$T/out" 2>"$T/err"
rc=$?
grep -qx "helper 2.0" "$T/out"
ok $? "keys in \$JUPYTER_AGENT_TRUSTED_KEYS are trusted, and a bare NAME picks the highest version"
[ "$rc" = 1 ] && grep -q "ModuleNotFoundError: No module named 'greet'" "$T/out" "$T/err"
ok $? "a second session does not see the packages the first one installed"

# --- refusals, each before any user code ------------------------------------------
# shellcheck disable=SC2086
expect 2 "package 'nosuch' is not in the signed manifest of $T/p; available: greet 1.0, helper 1.5, helper 2.0, oldie 1.0" \
    "a package not in the manifest is refused, listing what the manifest has" -- \
    --packages "$T/p" $A --install nosuch -c 'print("USER CODE RAN")'
no_user_code "the refused install stops the session before the user's code runs"

rm -rf "$T/q" && mkdir "$T/q" && cp "$T/wheels"/greet-* "$T/q/"
"$J" manifest sign --key "$T/a.key" "$T/q" >/dev/null 2>&1
# shellcheck disable=SC2086
expect 2 "greet 1.0 requires helper<2,>=1.0, which is not in the signed manifest of $T/q" \
    "a dependency missing from the manifest is refused, naming it" -- \
    --packages "$T/q" $A --install greet -c 'print("USER CODE RAN")'
no_user_code "no user code runs after a missing dependency"

# shellcheck disable=SC2086
expect 2 "helper 3.0 is not in the signed manifest of $T/p; versions available: helper 1.5, helper 2.0" \
    "--install NAME==VER for a version the manifest lacks is refused, listing its versions" -- \
    --packages "$T/p" $A --install greet --install helper==3.0 -c 'print("USER CODE RAN")'

# shellcheck disable=SC2086
expect 2 "conflict: greet 1.0 requires helper<2,>=1.0, but helper 2.0 is being installed (requested)" \
    "a pinned version that breaks a dependency's specifier is refused as a conflict" -- \
    --packages "$T/p" $A --install helper==2.0 --install greet -c 'print("USER CODE RAN")'

sign tamper a
"$PY" - "$T/tamper/helper-1.5-py3-none-any.whl" <<'EOF'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[45] ^= 1
open(p, "wb").write(b)
EOF
# shellcheck disable=SC2086
expect 8 "helper-1.5-py3-none-any.whl (helper 1.5): SHA-256 mismatch" \
    "a tampered wheel is refused with exit 8, naming it" -- \
    --packages "$T/tamper" $A --install greet -c 'print("USER CODE RAN")'
! grep -q "Successfully installed\|packages: installed" "$T/out" "$T/err"
ok $? "nothing is installed from a directory with a tampered wheel"
no_user_code "no user code runs after a tampered wheel"

sign byb b
B_ID=$(sed -n 's/^key-id: //p' "$T/byb/manifest.sig")
# shellcheck disable=SC2086
expect 8 "signed by key $B_ID" "a manifest signed by an untrusted key is refused with exit 8" -- \
    --packages "$T/byb" $A --install greet -c 'print("USER CODE RAN")'
expect 8 "no trusted keys" "without any trusted key nothing installs" -- \
    --packages "$T/p" --install greet -c 'print("USER CODE RAN")'
# shellcheck disable=SC2086
expect 2 "pip refused to install from $T/p" \
    "pip's own refusal (a wheel for another Python) is surfaced" -- \
    --packages "$T/p" $A --install oldie -c 'print("USER CODE RAN")'
grep -q "ERROR:" "$T/err"
ok $? "the refusal quotes pip's ERROR lines"

expect 2 "--install needs --packages DIR" "--install without --packages is a usage error" -- \
    --install greet -c 'print("USER CODE RAN")'
expect 2 "--packages needs the sandbox" "--packages with --no-sandbox is refused" -- \
    --no-sandbox --packages "$T/p" --install greet -c 'print("USER CODE RAN")'

# --- the network stayed off ---------------------------------------------------------
[ ! -s "$T/hits" ]
ok $? "the host's loopback service saw no connection during any install or run"

done_testing
