#!/bin/sh
# Integration test (TAP): `jupyter-agent manifest keygen|sign|verify` on real
# wheels built here with /usr/bin/python3 zipfile. Each refusal the operator
# may meet is produced for real and must exit 8 naming the file or key.
# Manifests with hostile contents are re-signed by an independent Ed25519
# implementation (python3-cryptography), so they fail for the reason under
# test and not for a bad signature.
set -u
. "$(dirname "$0")/../tap.sh"
J=${JUPYTER_AGENT_BIN:-$PWD/build/jupyter-agent}
PY=${JUPYTER_AGENT_PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/test_manifest_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
# Keep the host's trusted keys out: an empty trusted-keys dir and HOME.
mkdir -p "$T/home" "$T/none"
export HOME="$T/home"
export JUPYTER_AGENT_TRUSTED_KEYS="$T/none"

# run ARGS...: run the binary; sets rc, output in $T/out and $T/err.
run() {
    "$J" manifest "$@" >"$T/out" 2>"$T/err"
    rc=$?
}

cat >"$T/mkwheel.py" <<'EOF'
# mkwheel.py OUTDIR NAME==VERSION...: build minimal valid wheels.
import base64, hashlib, os, sys, zipfile
def b64(d):
    return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
for spec in sys.argv[2:]:
    dist, ver = spec.split("==")
    di = f"{dist}-{ver}.dist-info"
    files = {
        f"{dist.lower()}/__init__.py": f"__version__ = {ver!r}\n".encode(),
        f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {ver}\n".encode(),
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rec = [f"{k},sha256={b64(v)},{len(v)}" for k, v in files.items()] + [f"{di}/RECORD,,"]
    files[f"{di}/RECORD"] = ("\n".join(rec) + "\n").encode()
    with zipfile.ZipFile(os.path.join(sys.argv[1], f"{dist}-{ver}-py3-none-any.whl"), "w") as z:
        for k, v in files.items():
            z.writestr(zipfile.ZipInfo(k, (2020, 1, 1, 0, 0, 0)), v)
EOF

cat >"$T/resign.py" <<'EOF'
# resign.py SECRET_KEY_FILE DIR [EDIT]: optionally edit DIR/manifest.json,
# then sign it with an independent Ed25519 implementation.
import base64, hashlib, json, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
keyfile, d = sys.argv[1], sys.argv[2]
edit = sys.argv[3] if len(sys.argv) > 3 else ""
sk = base64.b64decode(open(keyfile).read().split()[0].split(":", 1)[1])
priv = Ed25519PrivateKey.from_private_bytes(sk[:32])
pk = priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
path = d + "/manifest.json"
data = open(path, "rb").read()
if edit == "raw-garbage":
    data = b'{"format": "jupyter-agent-manifest/1", "files": [}'
elif edit:
    m = json.loads(data)
    f = m["files"]
    if edit == "dotdot":
        f[0]["filename"] = "../outside-1.0-py3-none-any.whl"; f[0]["name"] = "outside"
    elif edit == "absolute":
        f[0]["filename"] = "/tmp/outside-1.0-py3-none-any.whl"; f[0]["name"] = "outside"
    elif edit == "slash":
        f[0]["filename"] = "sub/outside-1.0-py3-none-any.whl"; f[0]["name"] = "outside"
    elif edit == "duplicate":
        f.append(dict(f[0]))
    data = (json.dumps(m, indent=2) + "\n").encode()
open(path, "wb").write(data)
sig = priv.sign(data)
kid = hashlib.sha256(pk).hexdigest()[:16]
open(d + "/manifest.sig", "w").write(
    "format: jupyter-agent-signature/1\n"
    f"key-id: {kid}\n"
    f"public-key: ed25519:{base64.b64encode(pk).decode()}\n"
    f"signature: {base64.b64encode(sig).decode()}\n")
EOF
have_crypto=0
"$PY" -c 'import cryptography.hazmat.primitives.asymmetric.ed25519' 2>/dev/null &&
    have_crypto=1

skipn() { # count reason
    i=0
    while [ "$i" -lt "$1" ]; do
        n=$((n + 1))
        echo "ok $n # skip $2"
        i=$((i + 1))
    done
}

# A fresh signed copy of the three test wheels in $T/$1, signed by key A.
fresh() {
    rm -rf "$T/$1"
    cp -R "$T/wheels" "$T/$1"
    "$J" manifest sign --key "$T/a.key" "$T/$1" >/dev/null 2>&1
}

mkdir "$T/wheels"
"$PY" "$T/mkwheel.py" "$T/wheels" demo_pkg==1.0 Other.Lib==2.0.1 \
    tiny==0.1 || echo "Bail out! cannot build wheels with $PY"
W1=demo_pkg-1.0-py3-none-any.whl

# --- keygen -----------------------------------------------------------------
run keygen -o "$T/a.key" --label ops-a
[ "$rc" = 0 ] && [ "$(wc -l <"$T/out")" = 1 ] && grep -q '^ed25519:[A-Za-z0-9+/=]* ops-a$' "$T/out"
ok $? "keygen prints the public key as one pasteable line 'ed25519:<base64> LABEL'"
cp "$T/out" "$T/a.line"
cat "$T/err" >"$T/all-output"
cmp -s "$T/a.line" "$T/a.key.pub"
ok $? "the printed line is exactly what KEY.pub holds"
[ "$(stat -c %a "$T/a.key")" = 600 ]
ok $? "the secret key file is mode 0600"
(umask 0; "$J" manifest keygen -o "$T/b.key" --label ops-b >"$T/b.line" 2>>"$T/all-output")
[ "$(stat -c %a "$T/b.key")" = 600 ]
ok $? "the secret key file is 0600 even under umask 0"
sum_before=$(cksum <"$T/a.key")
expect 2 "refusing to overwrite" "keygen refuses to overwrite an existing key" -- \
    keygen -o "$T/a.key"
[ "$(cksum <"$T/a.key")" = "$sum_before" ]
ok $? "a refused keygen leaves the existing secret key untouched"
expect 2 "needs -o KEY" "keygen without -o is a usage error" -- keygen

# --- sign -------------------------------------------------------------------
cp -R "$T/wheels" "$T/p"
touch "$T/p/.hidden-editor-file"
expect 0 "signed 3 wheels in $T/p with key" "sign hashes every wheel and says what it signed" -- \
    sign --key "$T/a.key" "$T/p"
cat "$T/out" "$T/err" >>"$T/all-output"
grep -q 'signed *other-lib 2.0.1  Other.Lib-2.0.1-py3-none-any.whl' "$T/out"
ok $? "sign lists each wheel under its normalized project name and version"
[ -f "$T/p/manifest.json" ] && [ -f "$T/p/manifest.sig" ]
ok $? "sign writes DIR/manifest.json and DIR/manifest.sig"
want=$(sha256sum "$T/p/$W1" | cut -d' ' -f1)
grep -q "\"sha256\": \"$want\"" "$T/p/manifest.json"
ok $? "the manifest records the wheel's SHA-256 as sha256sum computes it"
grep -q "\"size\": $(stat -c %s "$T/p/$W1")," "$T/p/manifest.json"
ok $? "the manifest records the wheel's size in bytes"
grep -q '"format": "jupyter-agent-manifest/1"' "$T/p/manifest.json" &&
    grep -q "\"signer\": \"$(sed -n 's/^key-id: //p' "$T/p/manifest.sig")\"" "$T/p/manifest.json"
ok $? "the manifest carries its format and the signer's key id"

# --- verify: accepted ---------------------------------------------------------
expect 0 "verified: 3 of 3 files in $T/p match the signed manifest" \
    "verify accepts a signed directory with a trusted .pub file" -- \
    verify --trust "$T/a.key.pub" "$T/p"
cat "$T/out" "$T/err" >>"$T/all-output"
grep -qF "signed by trusted key $(sed -n 's/^key-id: //p' "$T/p/manifest.sig") (ops-a, from $T/a.key.pub)" "$T/out"
ok $? "verify says which trusted key signed and where its trust came from"
expect 0 "verified: 3 of 3" "verify accepts the key pasted as a string" -- \
    verify --trust "$(cat "$T/a.line")" "$T/p"
mkdir "$T/tk" && cp "$T/a.key.pub" "$T/tk/"
JUPYTER_AGENT_TRUSTED_KEYS="$T/tk" "$J" manifest verify "$T/p" >"$T/out" 2>&1
ok $? "verify trusts the *.pub files in \$JUPYTER_AGENT_TRUSTED_KEYS"
mkdir -p "$HOME/.config/jupyter-agent/trusted-keys"
cp "$T/a.key.pub" "$HOME/.config/jupyter-agent/trusted-keys/"
env -u JUPYTER_AGENT_TRUSTED_KEYS "$J" manifest verify "$T/p" >"$T/out" 2>&1
ok $? "verify trusts ~/.config/jupyter-agent/trusted-keys/ when the variable is unset"
rm -rf "$HOME/.config"
if [ "$have_crypto" = 1 ]; then
    fresh indep && "$PY" "$T/resign.py" "$T/a.key" "$T/indep"
    expect 0 "verified: 3 of 3" "a signature made by another Ed25519 implementation verifies" -- \
        verify --trust "$T/a.key.pub" "$T/indep"
else
    skipn 1 "python3-cryptography is not installed"
fi

# --- verify: refused ----------------------------------------------------------
expect 8 "no trusted keys" "with no trusted keys nothing verifies, and the fix is named" -- \
    verify "$T/p"

fresh tamper
"$PY" - "$T/tamper/$W1" <<'EOF'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[40] ^= 1
open(p, "wb").write(b)
EOF
expect 8 "$W1 (demo-pkg 1.0): SHA-256 mismatch" \
    "a tampered wheel of the same size is refused, naming file and package" -- \
    verify --trust "$T/a.key.pub" "$T/tamper"
grep -q "FAILED demo-pkg 1.0" "$T/out" && grep -q "ok     tiny 0.1" "$T/out" &&
    grep -q "1 of 3 files" "$T/err"
ok $? "verify reports every file, so one bad wheel does not hide the rest"

fresh grown
printf x >>"$T/grown/$W1"
expect 8 "$W1 (demo-pkg 1.0): size mismatch" "a wheel whose size changed is refused" -- \
    verify --trust "$T/a.key.pub" "$T/grown"

fresh edited
sed -i 's/"version": "0.1"/"version": "0.2"/' "$T/edited/manifest.json"
expect 8 "manifest.json was changed after signing" \
    "a manifest.json edited after signing is refused" -- \
    verify --trust "$T/a.key.pub" "$T/edited"

A_ID=$(sed -n 's/^key-id: //p' "$T/p/manifest.sig")
rm -rf "$T/byb" && cp -R "$T/wheels" "$T/byb"
"$J" manifest sign --key "$T/b.key" "$T/byb" >/dev/null 2>&1
B_ID=$(sed -n 's/^key-id: //p' "$T/byb/manifest.sig")
expect 8 "signed by key $B_ID" \
    "a manifest signed by an untrusted key is refused, naming the signer" -- \
    verify --trust "$T/a.key.pub" "$T/byb"
grep -qF "trusted keys: $A_ID (ops-a, $T/a.key.pub)" "$T/err"
ok $? "the refusal lists which keys are trusted"
expect 0 "signed by trusted key $B_ID (ops-b" \
    "rotation: signed by key B while A and B are trusted verifies" -- \
    verify --trust "$T/a.key.pub" --trust "$T/b.key.pub" "$T/byb"

fresh nosig
rm "$T/nosig/manifest.sig"
expect 8 "manifest.sig is missing" "a directory without manifest.sig is refused as unsigned" -- \
    verify --trust "$T/a.key.pub" "$T/nosig"
fresh badsig
echo "this is not a signature" >"$T/badsig/manifest.sig"
expect 8 "manifest.sig is malformed" "a malformed manifest.sig is refused" -- \
    verify --trust "$T/a.key.pub" "$T/badsig"
fresh shortsig
sed -i 's/^signature: ..../signature: /' "$T/shortsig/manifest.sig"
expect 8 "is not 64 bytes" "a truncated signature is refused as malformed" -- \
    verify --trust "$T/a.key.pub" "$T/shortsig"

fresh absent
rm "$T/absent/$W1"
expect 8 "$W1 (demo-pkg 1.0) is listed in the manifest but absent" \
    "a wheel listed but absent is refused, naming it" -- \
    verify --trust "$T/a.key.pub" "$T/absent"

fresh symlinked
mv "$T/symlinked/$W1" "$T/real.whl"
ln -s "$T/real.whl" "$T/symlinked/$W1"
expect 8 "$W1 (demo-pkg 1.0) is a symlink" \
    "a symlinked wheel is refused even when it points at the right bytes" -- \
    verify --trust "$T/a.key.pub" "$T/symlinked"
rm -rf "$T/signlink" && cp -R "$T/wheels" "$T/signlink"
ln -s "$T/real.whl" "$T/signlink/linked-1.0-py3-none-any.whl"
expect 2 "linked-1.0-py3-none-any.whl is a symlink" "sign refuses a symlinked wheel" -- \
    sign --key "$T/a.key" "$T/signlink"

if [ "$have_crypto" = 1 ]; then
    # A wheel outside the directory with the right hash: only the path is wrong.
    "$PY" "$T/mkwheel.py" "$T" outside==1.0
    for how in dotdot absolute slash; do
        fresh "esc-$how"
        "$PY" - "$T/esc-$how/manifest.json" "$T/outside-1.0-py3-none-any.whl" <<'EOF'
import hashlib, json, os, sys
m = json.load(open(sys.argv[1])); b = open(sys.argv[2], "rb").read()
m["files"][0].update(version="1.0", size=len(b), sha256=hashlib.sha256(b).hexdigest())
open(sys.argv[1], "w").write(json.dumps(m, indent=2) + "\n")
EOF
        "$PY" "$T/resign.py" "$T/a.key" "$T/esc-$how" "$how"
    done
    expect 8 "../outside-1.0-py3-none-any.whl' contains '/' and escapes the directory" \
        "a signed manifest entry '../x.whl' is refused" -- \
        verify --trust "$T/a.key.pub" "$T/esc-dotdot"
    expect 8 "is an absolute path" "a signed manifest entry with an absolute path is refused" -- \
        verify --trust "$T/a.key.pub" "$T/esc-absolute"
    expect 8 "sub/outside-1.0-py3-none-any.whl' contains '/'" \
        "a signed manifest entry with '/' in its name is refused" -- \
        verify --trust "$T/a.key.pub" "$T/esc-slash"
    fresh dup && "$PY" "$T/resign.py" "$T/a.key" "$T/dup" duplicate
    expect 8 "duplicate entry for" "a signed manifest with a duplicate entry is refused" -- \
        verify --trust "$T/a.key.pub" "$T/dup"
    fresh garbage && "$PY" "$T/resign.py" "$T/a.key" "$T/garbage" raw-garbage
    expect 8 "manifest.json: manifest is not valid JSON" \
        "a signed but malformed manifest.json is refused" -- \
        verify --trust "$T/a.key.pub" "$T/garbage"
else
    skipn 5 "python3-cryptography is not installed"
fi

# --- sign: refused -------------------------------------------------------------
rm -rf "$T/sdist" && cp -R "$T/wheels" "$T/sdist" && echo x >"$T/sdist/demo_pkg-1.0.tar.gz"
expect 2 "demo_pkg-1.0.tar.gz" "sign refuses a non-wheel file in DIR, naming it" -- \
    sign --key "$T/a.key" "$T/sdist"
[ ! -e "$T/sdist/manifest.json" ]
ok $? "a refused sign writes no manifest"
mkdir "$T/empty"
expect 2 "holds no wheels" "sign refuses a directory without wheels" -- \
    sign --key "$T/a.key" "$T/empty"
cp "$T/a.key" "$T/loose.key" && chmod 644 "$T/loose.key"
expect 2 "chmod 600" "sign refuses a secret key others can read" -- \
    sign --key "$T/loose.key" "$T/p"

# --- usage ---------------------------------------------------------------------
expect 2 "verify needs DIR" "verify without DIR is a usage error" -- verify
expect 2 "unrecognized option '--frobnicate'" "an unknown flag is a usage error" -- \
    verify --frobnicate "$T/p"
expect 2 "--trust" "a malformed --trust key is a usage error" -- \
    verify --trust "ed25519:nope" "$T/p"
expect 2 "cannot open package directory" "a missing DIR is a usage error" -- \
    verify --trust "$T/a.key.pub" "$T/does-not-exist"

# --- scale and extras --------------------------------------------------------------
mkdir "$T/hundred"
specs=""
i=0
while [ $i -lt 100 ]; do
    specs="$specs pkg$i==1.$i"
    i=$((i + 1))
done
# shellcheck disable=SC2086
"$PY" "$T/mkwheel.py" "$T/hundred" $specs
expect 0 "signed 100 wheels" "sign handles a 100-wheel directory" -- \
    sign --key "$T/a.key" "$T/hundred"
expect 0 "verified: 100 of 100 files" "verify checks a 100-file manifest" -- \
    verify --trust "$T/a.key.pub" "$T/hundred"
cp "$T/hundred/pkg0-1.0-py3-none-any.whl" "$T/hundred/stray-9.9-py3-none-any.whl"
expect 0 "stray-9.9-py3-none-any.whl is not in the manifest and will never be used" \
    "a wheel added after signing is reported as unused, not trusted" -- \
    verify --trust "$T/a.key.pub" "$T/hundred"

# The secret key never appears in anything the commands print.
SECRET=$(cut -d' ' -f1 "$T/a.key" | cut -d: -f2)
SEED=$(printf %s "$SECRET" | cut -c1-40)
cat "$T/out" "$T/err" "$T/a.line" "$T/b.line" >>"$T/all-output"
! grep -qF "$SEED" "$T/all-output" && grep -q "^ed25519:" "$T/all-output" &&
    grep -q "signed 3 wheels" "$T/all-output"
ok $? "no command prints any part of the secret key"

done_testing
