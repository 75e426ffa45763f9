"""Hostile report archives against `jupyter-agent archive`.

The archivist signs what a notebook carries, so a signed archive is still
hostile input: its strings reach the verifier's terminal, its recorded
limits reach the sandbox, its entries reach memory, and the keys that
decide what is trusted sit in directories someone else might write.
Archives here are packed by the binary from hostile notebooks, then edited
and re-signed with an independent Ed25519 (python3-cryptography), so every
check is about what a trusted signature covers, not a bad signature.
Each check is one TAP line naming the guarantee.
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

BIN = os.environ.get("JUPYTER_AGENT_BIN", "build/jupyter-agent")
T = tempfile.mkdtemp(prefix="ja-archive-hostile-")
os.chmod(T, 0o755)
ENV = dict(os.environ, HOME=os.path.join(T, "home"),
           TMPDIR=os.path.join(T, "tmp"),
           JUPYTER_AGENT_TRUSTED_KEYS=os.path.join(T, "no-keys"))
ENV.pop("XDG_RUNTIME_DIR", None)
os.makedirs(ENV["HOME"])
os.makedirs(ENV["TMPDIR"])
N = 0
FAILED = 0

# Sequences a terminal obeys: OSC 52 (clipboard), OSC 0 (title), CSI as
# ESC [ and as the C1 control U+009B, a bare CR and a BEL.
HOSTILE = ("\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\x1b[2J\u009b31m"
           "\rfake\ttab\x7f")


def ok(cond, what, diag=None):
    global N, FAILED
    N += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (N, what))
    if not cond:
        FAILED += 1
        if diag is not None:
            for line in str(diag)[:3000].splitlines():
                print("# " + line)
    sys.stdout.flush()


def run(*args, env=None, timeout=300):
    return subprocess.run([BIN, *args], capture_output=True,
                          env=env or ENV, timeout=timeout)


def raw_controls(data):
    """Bytes a terminal could act on: C0 but '\\n', DEL, and 0x9b (CSI in
    8-bit terminals; no test string here holds it in a valid character)."""
    return [b for b in data if (b < 0x20 and b != 0x0a) or b in (0x7f, 0x9b)]


def clean(r):
    return not raw_controls(r.stdout) and not raw_controls(r.stderr)


# ---- keys and re-signing -------------------------------------------------

def keygen(path, label):
    r = run("manifest", "keygen", "-o", path, "--label", label)
    assert r.returncode == 0, r.stderr
    return path + ".pub"


def resign(src, dst, key, edit=None, add=(), first=()):
    """Copy the archive, edit(name, bytes) -> bytes, add entries; rebuild
    the manifest and the in-toto statement and sign them with `key`.
    `first` entries go into the zip ahead of everything, unlisted."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import \
        Ed25519PrivateKey
    with zipfile.ZipFile(src) as z:
        names = [n for n in z.namelist()
                 if n not in ("provenance.json", "manifest-sha256.txt")]
        files = [(n, z.read(n)) for n in names]
        old = json.loads(z.read("provenance.json"))
    if edit:
        files = [(n, edit(n, d)) for n, d in files]
    files += list(add)
    subjects = [{"name": n, "digest": {"sha256": hashlib.sha256(d).hexdigest()}}
                for n, d in files]
    manifest = "".join("%s  %s\n" % (s["digest"]["sha256"], s["name"])
                       for s in sorted(subjects, key=lambda s: s["name"]))
    files.append(("manifest-sha256.txt", manifest.encode()))
    subjects.append({"name": "manifest-sha256.txt", "digest": {
        "sha256": hashlib.sha256(manifest.encode()).hexdigest()}})
    statement = json.loads(base64.b64decode(old["payload"]))
    statement["subject"] = subjects
    body = json.dumps(statement, separators=(",", ":"),
                      sort_keys=True).encode()
    ptype = b"application/vnd.in-toto+json"
    pae = b"DSSEv1 %d %s %d %s" % (len(ptype), ptype, len(body), body)
    raw = base64.b64decode(open(key).read().split()[0].split(":", 1)[1])
    sig = Ed25519PrivateKey.from_private_bytes(raw[:32]).sign(pae)
    envelope = {"payloadType": ptype.decode(),
                "payload": base64.b64encode(body).decode(),
                "signatures": [{"keyid": "resigned",
                                "sig": base64.b64encode(sig).decode()}]}
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in first:
            z.writestr(name, data)
        for name, data in files:
            z.writestr(name, data)
        z.writestr("provenance.json", json.dumps(envelope))
    return dst


def edit_json(target, change):
    def edit(name, data):
        if name != target:
            return data
        j = json.loads(data)
        change(j)
        return json.dumps(j, indent=1).encode()
    return edit


KEY = os.path.join(T, "archivist")
PUB = keygen(KEY, "archivist")


def notebook(path, cells, meta=None):
    nb = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3",
                                      "display_name": "Python 3",
                                      "language": "python"},
                       "jupyter_agent": {"inputs": []}}}
    for k, v in (meta or {}).items():
        nb["metadata"][k] = v
    with open(path, "w") as f:
        json.dump(nb, f)
    return path


def code(src, text=None):
    outs = [] if text is None else [
        {"output_type": "stream", "name": "stdout", "text": text}]
    return {"cell_type": "code", "id": "c%d" % abs(hash(src) % 10000),
            "source": src, "metadata": {}, "execution_count": 1,
            "outputs": outs}


def pack(nb, out):
    r = run("archive", "pack", nb, "-o", out, "--key", KEY, "--no-probe",
            "--force")
    assert r.returncode == 0, r.stderr
    return out


# ---- 1. strings from a signed archive are escaped on the terminal --------

hostile_nb = notebook(os.path.join(T, "hostile.ipynb"), [
    code("print('hello')", "hello " + HOSTILE + "\n")],
    {"kernelspec": {"name": "python3", "language": "python",
                    "display_name": "Py " + HOSTILE},
     "jupyter_agent": {"inputs": [], "provider": "openai" + HOSTILE,
                       "model": "gpt" + HOSTILE, "status": "ok" + HOSTILE,
                       "timings": {"started": "t0" + HOSTILE,
                                   "ended": "t1"}}})
base = pack(hostile_nb, os.path.join(T, "hostile-base.zip"))


def hostile_env(j):
    j["python"] = {"python": "3.0" + HOSTILE,
                   "notebook_imports": ["json", "os" + HOSTILE],
                   "modules": {"json": {"version": "0.0" + HOSTILE,
                                        "debian_package": "x" + HOSTILE},
                               "os" + HOSTILE: {"version": "1" + HOSTILE}}}
    j["packed"] = "now" + HOSTILE


hostile = resign(base, os.path.join(T, "hostile.zip"), KEY,
                 edit_json("environment.json", hostile_env))
r = run("archive", "show", hostile, "--trust", PUB)
ok(r.returncode == 0 and clean(r) and b"\\e]52;c;" in r.stdout
   and b"\\e]0;pwned" in r.stdout,
   "archive show escapes the kernelspec, provider, model, status, lock and "
   "names of a signed hostile notebook (exit %d)" % r.returncode,
   r.stdout + r.stderr)
ok(b"model:       gpt" in r.stdout and b"(provider openai" in r.stdout,
   "archive show names the model once, with its provider", r.stdout)

# A name may not hold controls, but may hold a bidi override (U+202E) or
# any other UTF-8: read as UTF-8 whatever the locale, and shown escaped.
bidi = resign(base, os.path.join(T, "bidi.zip"), KEY,
              add=[("inputs/in\u202etxt.csv", b"a,b\n"),
                   ("inputs/donn\u00e9es.csv", b"c,d\n")])
r = run("archive", "show", bidi, "--trust", PUB)
ok(r.returncode == 0 and b"in\\xe2\\x80\\xaetxt.csv" in r.stdout and
   "donn\u00e9es.csv".encode() in r.stdout and "\u202e".encode()
   not in r.stdout,
   "archive show reads UTF-8 entry names and escapes a bidi override in "
   "one (exit %d)" % r.returncode, r.stdout + r.stderr)

r = run("archive", "verify", hostile, "--trust", PUB)
ok(r.returncode == 0 and clean(r),
   "archive verify escapes what it prints of the archive (exit %d)"
   % r.returncode, r.stdout + r.stderr)

r = run("archive", "rerun", hostile, "--trust", PUB, timeout=600)
ok(r.returncode == 9 and clean(r) and b"cell " in r.stdout
   and b"\\e]0;pwned" in r.stdout + r.stderr,
   "archive rerun escapes recorded outputs in its diff lines and the "
   "environment lock in its warning (exit %d)" % r.returncode,
   r.stdout + r.stderr)

bad_kernel = resign(base, os.path.join(T, "bad-kernel.zip"), KEY,
                    edit_json("report.ipynb", lambda j: j["metadata"][
                        "kernelspec"].update(name="nope" + HOSTILE)))
r = run("archive", "rerun", bad_kernel, "--trust", PUB, timeout=300)
ok(r.returncode != 0 and clean(r),
   "archive rerun escapes a recorded kernel name in its error (exit %d)"
   % r.returncode, r.stdout + r.stderr)

# ---- 2. recorded limits go through the flags' setters --------------------

plain_nb = notebook(os.path.join(T, "plain.ipynb"),
                    [code("print(6 * 7)", "42\n")])
plain = pack(plain_nb, os.path.join(T, "plain.zip"))


def with_limits(name, **limits):
    def change(j):
        j.setdefault("sandbox", {})
        j["sandbox"] = j["sandbox"] or {}
        j["sandbox"].update(limits)
    return resign(plain, os.path.join(T, name), KEY,
                  edit_json("environment.json", change))


def rerun_dirs():
    """Rerun directories left in TMPDIR since the last call."""
    left = [n for n in os.listdir(ENV["TMPDIR"])
            if n.startswith("jupyter-agent-rerun-")]
    for n in left:
        shutil.rmtree(os.path.join(ENV["TMPDIR"], n), ignore_errors=True)
    return left


rerun_dirs()
for name, limits, why in [
        ("mem0.zip", {"memory_bytes": 0}, "memory_bytes 0"),
        ("pids-big.zip", {"pids": 4294967296}, "pids 4294967296"),
        ("pids-absurd.zip", {"pids": 10 ** 9}, "pids 10^9"),
        ("cpus0.zip", {"cpus": 0}, "cpus 0"),
        ("mem-neg.zip", {"memory_bytes": -1}, "memory_bytes -1"),
        ("mem-str.zip", {"memory_bytes": "2G"}, "memory_bytes \"2G\""),
        ("swap-neg.zip", {"swap_bytes": -5}, "swap_bytes -5")]:
    z = with_limits(name, **limits)
    r = run("archive", "rerun", z, "--trust", PUB, timeout=300)
    ok(r.returncode == 8 and rerun_dirs() == [] and
       b"refused" in r.stderr and b"cell" not in r.stdout,
       "archive rerun refuses recorded %s with exit 8 and leaves no rerun "
       "dir (exit %d)" % (why, r.returncode), r.stdout + r.stderr)

z = with_limits("huge.zip", memory_bytes=2 ** 62, pids=4000000)
r = run("archive", "rerun", z, "--trust", PUB, timeout=600)
ok(r.returncode == 0 and b"re-running with 2147483648" in r.stderr and
   b"re-running with 128" in r.stderr and rerun_dirs() == [],
   "archive rerun clamps recorded memory 2^62 and pids 4000000 to the "
   "defaults (exit %d)" % r.returncode, r.stdout + r.stderr)
r = run("archive", "rerun", z, "--trust", PUB, "--memory", "1G",
        "--pids", "64", timeout=600)
ok(r.returncode == 0 and b"re-running with 1073741824" in r.stderr and
   b"re-running with 64" in r.stderr,
   "archive rerun clamps recorded limits to the operator's --memory and "
   "--pids (exit %d)" % r.returncode, r.stdout + r.stderr)
r = run("archive", "rerun", plain, "--trust", PUB, "--memory", "0")
ok(r.returncode == 2 and b"--memory" in r.stderr,
   "archive rerun's own --memory is checked as every command's is",
   r.stderr)

# ---- 3. verify reads nothing big before the signature -------------------

def measured(*args):
    """(exit code, output, peak RSS in MiB) of one run, measured by
    /usr/bin/time so that none of this script's memory is counted."""
    rss = os.path.join(T, "rss")
    r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss, BIN, *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=ENV, timeout=600)
    return r.returncode, r.stdout, int(open(rss).read().split()[-1]) / 1024


ZEROS = b"\0" * (200 << 20)
NOISE = os.urandom(3 << 20)  # keeps the zip under the expansion-ratio check
bomb = os.path.join(T, "big-unlisted.zip")
with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zz:
    zz.writestr("a.bin", ZEROS)
    zz.writestr("b.bin", ZEROS)
    zz.writestr(zipfile.ZipInfo("noise.bin"), NOISE, zipfile.ZIP_STORED)
rc, out, mib = measured("archive", "verify", bomb, "--trust", PUB)
print("# verify of a %.1f MiB zip with two 200 MiB unlisted entries and no "
      "provenance.json: peak RSS %.1f MiB" % (os.path.getsize(bomb) / 2**20,
                                              mib))
ok(rc == 8 and b"provenance.json is missing" in out and mib < 64,
   "archive verify refuses a zip without provenance.json before holding its "
   "200 MiB entries (peak %.0f MiB, exit %d)" % (mib, rc), out)

signed_bomb = resign(plain, os.path.join(T, "signed-big.zip"), KEY,
                     first=[("a.bin", ZEROS), ("b.bin", ZEROS),
                            ("noise.bin", NOISE)])
rc, out, mib = measured("archive", "verify", signed_bomb, "--trust", PUB)
print("# verify of a signed archive with two 200 MiB unlisted entries ahead "
      "of it: peak RSS %.1f MiB" % mib)
ok(rc == 8 and b"a.bin is in the archive but not in its signed statement"
   in out and mib < 64,
   "archive verify refuses an unlisted 200 MiB entry before reading it "
   "(peak %.0f MiB, exit %d)" % (mib, rc), out)
del ZEROS

signed_bomb = resign(plain, os.path.join(T, "signed-bomb.zip"), KEY,
                     add=[("inputs/zeros.csv", b"\0" * (64 << 20))])
rc, out, mib = measured("archive", "verify", signed_bomb, "--trust", PUB)
ok(rc == 8 and b"zip bomb" in out and mib < 64,
   "archive verify refuses a signed entry expanding past the ratio as a zip "
   "bomb (peak %.0f MiB, exit %d)" % (mib, rc), out)

rerun_dirs()
rc, out, mib = measured("archive", "rerun", signed_bomb, "--trust", PUB)
ok(rc == 8 and rerun_dirs() == [],
   "archive rerun extracts nothing of an archive with unlisted entries "
   "(exit %d)" % rc, out)

# ---- 4. trusted keys: only directories and files nobody else writes ------

sticky = os.path.join(T, "sticky-keys")
os.mkdir(sticky)
os.chmod(sticky, 0o1777)
evil = os.path.join(T, "evil")
evil_pub = keygen(evil, "evil")
evil_zip = resign(plain, os.path.join(T, "evil.zip"), evil)
drop = subprocess.run(
    ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
     "sh", "-c", 'cat > "$1"', "sh", os.path.join(sticky, "evil.pub")],
    stdin=open(evil_pub, "rb"), capture_output=True)
st = os.stat(os.path.join(sticky, "evil.pub"))
assert drop.returncode == 0 and st.st_uid == 65534, drop.stderr
env = dict(ENV, JUPYTER_AGENT_TRUSTED_KEYS=sticky)
r = run("archive", "verify", evil_zip, env=env)
ok(r.returncode != 0 and b"world-writable" in r.stderr,
   "a key dropped by uid 65534 into a sticky 1777 trusted-keys dir does "
   "not verify an archive (exit %d)" % r.returncode, r.stdout + r.stderr)

def key_dir(name, mode=0o755, link=False, file_uid=None, dir_uid=None):
    """A trusted-keys dir holding evil's key, made unsafe as asked."""
    d = os.path.join(T, name)
    os.mkdir(d)
    os.chmod(d, mode)
    f = os.path.join(d, "evil.pub")
    if link:
        os.symlink(evil_pub, f)
    else:
        shutil.copy(evil_pub, f)
    if file_uid is not None:
        os.chown(f, file_uid, file_uid)
    if dir_uid is not None:
        os.chown(d, dir_uid, dir_uid)
    return d


for d, want, what in [
        (key_dir("keys-other-file", file_uid=65534), b"owned by another user",
         "a key file owned by another uid in a root-owned 0755 dir"),
        (key_dir("keys-other-dir", dir_uid=65534), b"owned by another user",
         "a trusted-keys dir owned by another uid"),
        (key_dir("keys-group", mode=0o775), b"group-writable",
         "a group-writable trusted-keys dir"),
        (key_dir("keys-link", link=True), b"symlink",
         "a symlinked key file in a trusted-keys dir")]:
    r = run("archive", "verify", evil_zip,
            env=dict(ENV, JUPYTER_AGENT_TRUSTED_KEYS=d))
    ok(r.returncode != 0 and want in r.stderr,
       "%s is refused (exit %d)" % (what, r.returncode), r.stdout + r.stderr)

good = key_dir("keys-good")
r = run("archive", "verify", evil_zip,
        env=dict(ENV, JUPYTER_AGENT_TRUSTED_KEYS=good))
ok(r.returncode == 0,
   "a key in a 0755 dir owned by root still verifies (exit %d)"
   % r.returncode, r.stderr)

# The same trust code decides signed wheel manifests.
wheels = os.path.join(T, "wheels")
os.mkdir(wheels)
with zipfile.ZipFile(os.path.join(wheels, "demo-1.0-py3-none-any.whl"),
                     "w") as w:
    w.writestr("demo/__init__.py", "")
    w.writestr("demo-1.0.dist-info/METADATA",
               "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    w.writestr("demo-1.0.dist-info/WHEEL",
               "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\n"
               "Tag: py3-none-any\n")
    w.writestr("demo-1.0.dist-info/RECORD", "")
r = run("manifest", "sign", "--key", evil, wheels)
assert r.returncode == 0, r.stderr
r = run("manifest", "verify", wheels,
        env=dict(ENV, JUPYTER_AGENT_TRUSTED_KEYS=sticky))
ok(r.returncode != 0 and b"world-writable" in r.stderr,
   "a key dropped into a sticky 1777 dir does not verify a wheel manifest "
   "(exit %d)" % r.returncode, r.stdout + r.stderr)
r = run("manifest", "verify", wheels,
        env=dict(ENV, JUPYTER_AGENT_TRUSTED_KEYS=good))
ok(r.returncode == 0, "the same key from a safe dir verifies the wheels",
   r.stdout + r.stderr)

print("1..%d" % N)
shutil.rmtree(T, ignore_errors=True)
sys.exit(1 if FAILED else 0)
