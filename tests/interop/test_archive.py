"""Report archives (`jupyter-agent archive`): the finance demo session is
packed with `ask --archive`, verified and re-run; every kind of tampering
is refused with exit 8 naming the file; and readers that are not our code
check what we wrote: `sha256sum -c` the manifest, python3-cryptography's
Ed25519 the DSSE signature, the npm ro-crate library the RO-Crate."""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import zipfile

import nbformat
import pytest
from conftest import ROOT, SANDBOX_ARGS, run_agent

DATA = os.path.join(ROOT, "examples", "data")
SESSION = os.path.join(ROOT, "examples", "sessions",
                       "quarterly-variance.jsonl")
CRATE_DIR = os.path.join(ROOT, "tests", "archive-js")
QUESTION = ("Here are our 2026 budget and the GL actuals for each quarter. "
            "Give me a variance report by department, account and quarter: "
            "flag the biggest variances, explain what caused them, and make "
            "charts.")

pytestmark = pytest.mark.skipif(
    SANDBOX_ARGS != [], reason="--file needs the sandbox (JA_TEST_SANDBOX=0)")


def _keygen(path, label):
    r = run_agent("manifest", "keygen", "-o", str(path), "--label", label)
    assert r.returncode == 0, r.stderr
    return str(path) + ".pub"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    d = tmp_path_factory.mktemp("archive")
    data = d / "data"
    shutil.copytree(DATA, data)
    key = d / "archivist"
    pub = _keygen(key, "archivist")
    args = []
    for name in sorted(os.listdir(data)):
        if name.endswith(".csv"):
            args += ["--file", str(data / name)]
    nb = d / "report.ipynb"
    archive = d / "report.zip"
    r = run_agent("ask", *args, "--model", "replay:" + SESSION, "-o", str(nb),
                  "--archive", str(archive), "--archive-key", str(key),
                  QUESTION, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert archive.exists(), r.stdout + r.stderr
    return {"dir": d, "data": data, "key": str(key), "pub": pub, "nb": nb,
            "zip": archive}


def _unzip(archive, dest):
    with zipfile.ZipFile(archive) as z:
        z.extractall(dest)
    return dest


def _rewrite(src, dst, edit=None, drop=(), add=()):
    """Copy a zip entry by entry; edit(name, bytes) may return new bytes."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(
            dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            data = zin.read(info.filename)
            if edit:
                data = edit(info.filename, data)
            zout.writestr(info.filename, data)
        for name, data in add:
            zout.writestr(name, data)
    return dst


def _verify(archive, pub, *extra):
    return run_agent("archive", "verify", str(archive), "--trust", pub,
                     *extra)


# ---- the good path --------------------------------------------------------

def test_archive_holds_the_session(demo):
    with zipfile.ZipFile(demo["zip"]) as z:
        names = set(z.namelist())
    for want in ("report.ipynb", "environment.json", "ro-crate-metadata.json",
                 "manifest-sha256.txt", "provenance.json",
                 "inputs/budget_2026.csv", "inputs/actuals_2026_q3.csv",
                 "outputs/variance_heatmap.png"):
        assert want in names
    env = json.loads(zipfile.ZipFile(demo["zip"]).read("environment.json"))
    assert env["python"]["modules"]["pandas"]["version"]
    assert env["python"]["modules"]["pandas"]["debian_package"] == \
        "python3-pandas"
    assert "pandas" in env["python"]["notebook_imports"]
    assert env["model"]["provider"] == "replay"
    text = json.dumps(env)
    assert "API_KEY" not in text and "sk-" not in text


def test_notebook_records_its_inputs_with_hashes(demo):
    nb = json.loads(demo["nb"].read_text())
    inputs = {i["name"]: i for i in nb["metadata"]["jupyter_agent"]["inputs"]}
    assert set(inputs) == {n for n in os.listdir(demo["data"])
                           if n.endswith(".csv")}
    path = demo["data"] / "budget_2026.csv"
    assert inputs["budget_2026.csv"]["sha256"] == \
        hashlib.sha256(path.read_bytes()).hexdigest()


def test_verify_accepts_the_trusted_signature(demo):
    r = _verify(demo["zip"], demo["pub"])
    assert r.returncode == 0, r.stderr
    assert "verified" in r.stdout and "archivist" in r.stdout


def test_show_summarises(demo):
    r = run_agent("archive", "show", str(demo["zip"]), "--trust", demo["pub"])
    assert r.returncode == 0, r.stderr
    assert "signed by:   key" in r.stdout
    assert "budget_2026.csv" in r.stdout and "pandas" in r.stdout


def test_rerun_reproduces_every_cell(demo, tmp_path):
    out = tmp_path / "rerun.ipynb"
    r = run_agent("archive", "rerun", str(demo["zip"]), "--trust",
                  demo["pub"], "-o", str(out), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 of 6 cells reproduced" in r.stdout
    nbformat.validate(nbformat.read(str(out), as_version=4))


# ---- readers that are not ours --------------------------------------------

def test_sha256sum_checks_the_manifest(demo, tmp_path):
    d = _unzip(demo["zip"], tmp_path / "x")
    r = subprocess.run(["sha256sum", "--strict", "-c", "manifest-sha256.txt"],
                       cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    listed = [ln.split("  ", 1)[1] for ln in
              (d / "manifest-sha256.txt").read_text().splitlines()]
    on_disk = sorted(str(p.relative_to(d)) for p in d.rglob("*")
                     if p.is_file())
    assert sorted(listed + ["manifest-sha256.txt", "provenance.json"]) == \
        on_disk


def test_dsse_signature_verifies_with_cryptography(demo):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import \
        Ed25519PublicKey
    z = zipfile.ZipFile(demo["zip"])
    env = json.loads(z.read("provenance.json"))
    assert env["payloadType"] == "application/vnd.in-toto+json"
    body = base64.b64decode(env["payload"])
    ptype = env["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(ptype), ptype, len(body), body)
    raw = base64.b64decode(
        open(demo["pub"]).read().split()[0].split(":", 1)[1])
    key = Ed25519PublicKey.from_public_bytes(raw)
    key.verify(base64.b64decode(env["signatures"][0]["sig"]), pae)
    statement = json.loads(body)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    subjects = {s["name"]: s["digest"]["sha256"]
                for s in statement["subject"]}
    for name in z.namelist():
        if name != "provenance.json":
            assert subjects.pop(name) == \
                hashlib.sha256(z.read(name)).hexdigest(), name
    assert subjects == {}


def _npm_ready():
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        pytest.skip("node is missing: install Debian's nodejs")
    if not os.path.isdir(os.path.join(CRATE_DIR, "node_modules", "ro-crate")):
        if npm is None:
            pytest.skip("npm is missing (needed once for `npm ci` in "
                        "tests/archive-js)")
        r = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit",
                            "--no-fund"], cwd=CRATE_DIR, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    return node


def test_ro_crate_library_reads_the_crate(demo, tmp_path):
    node = _npm_ready()
    d = _unzip(demo["zip"], tmp_path / "x")
    r = subprocess.run([node, os.path.join(CRATE_DIR, "read_crate.js"),
                        str(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    crate = json.loads(r.stdout)
    assert crate["errors"] == []
    assert "Dataset" in crate["rootTypes"]
    assert "https://w3id.org/ro/wfrun/process/0.4" in crate["conformsTo"]
    for f in crate["files"]:
        assert f["exists"], f["id"]
        assert f["sha256"] == hashlib.sha256(
            (d / f["id"]).read_bytes()).hexdigest()
    action = crate["action"]
    assert action["types"] == ["CreateAction"]
    assert "#jupyter-agent" in action["instrument"]
    assert "inputs/budget_2026.csv" in action["object"]
    assert "report.ipynb" in action["result"]
    assert "outputs/variance_heatmap.png" in action["result"]
    assert action["startTime"] and action["endTime"]


# ---- tampering -------------------------------------------------------------

def _refused(r, name):
    assert r.returncode == 8, r.stdout + r.stderr
    assert name in r.stderr, r.stderr


def test_edited_notebook_is_refused(demo, tmp_path):
    bad = _rewrite(demo["zip"], tmp_path / "a.zip",
                   lambda n, b: b.replace(b"366,696", b"166,696")
                   if n == "report.ipynb" else b)
    _refused(_verify(bad, demo["pub"]), "report.ipynb")


def test_swapped_input_of_the_same_size_is_refused(demo, tmp_path):
    def edit(name, data):
        if name == "inputs/actuals_2026_q3.csv":
            i = data.rindex(b"1")
            return data[:i] + b"2" + data[i + 1:]
        return data
    bad = _rewrite(demo["zip"], tmp_path / "a.zip", edit)
    _refused(_verify(bad, demo["pub"]), "inputs/actuals_2026_q3.csv")


def test_removed_file_is_refused(demo, tmp_path):
    bad = _rewrite(demo["zip"], tmp_path / "a.zip",
                   drop={"outputs/variance_heatmap.png"})
    _refused(_verify(bad, demo["pub"]), "outputs/variance_heatmap.png")


def test_added_file_is_refused(demo, tmp_path):
    bad = _rewrite(demo["zip"], tmp_path / "a.zip",
                   add=[("outputs/extra.csv", b"a,b\n1,2\n")])
    _refused(_verify(bad, demo["pub"]), "outputs/extra.csv")


def test_archive_signed_by_an_untrusted_key_is_refused(demo, tmp_path):
    other = _keygen(tmp_path / "mallory", "mallory")
    resigned = tmp_path / "resigned.zip"
    r = run_agent("archive", "pack", str(demo["nb"]), "-o", str(resigned),
                  "--key", str(tmp_path / "mallory"), "--no-probe")
    assert r.returncode == 0, r.stderr
    assert _verify(resigned, other).returncode == 0
    r = _verify(resigned, demo["pub"])
    assert r.returncode == 8 and "no trusted key" in r.stderr, r.stderr


def test_unsigned_archive_needs_allow_unsigned(demo, tmp_path):
    plain = tmp_path / "plain.zip"
    r = run_agent("archive", "pack", str(demo["nb"]), "-o", str(plain),
                  "--no-probe")
    assert r.returncode == 0, r.stderr
    r = _verify(plain, demo["pub"])
    assert r.returncode == 8 and "not signed" in r.stderr
    assert _verify(plain, demo["pub"], "--allow-unsigned").returncode == 0


def test_changed_dsse_payload_type_is_refused(demo, tmp_path):
    def edit(name, data):
        if name == "provenance.json":
            env = json.loads(data)
            env["payloadType"] = "application/json"
            return json.dumps(env).encode()
        return data
    bad = _rewrite(demo["zip"], tmp_path / "a.zip", edit)
    r = _verify(bad, demo["pub"])
    assert r.returncode == 8 and "payloadType" in r.stderr, r.stderr


@pytest.mark.parametrize("name,why", [
    ("../x", "'..'"), ("/etc/x", "absolute"), ("a//b", "empty"),
    ("inputs/\x1b]52;c;aGk=\x07", "control byte")])
def test_unsafe_entry_names_are_refused(demo, tmp_path, name, why):
    bad = _rewrite(demo["zip"], tmp_path / "a.zip", add=[(name, b"x")])
    r = _verify(bad, demo["pub"])
    assert r.returncode == 8 and why in r.stderr, r.stderr
    assert "\x1b" not in r.stderr


def test_symlink_entry_is_refused(demo, tmp_path):
    bad = tmp_path / "a.zip"
    shutil.copy(demo["zip"], bad)
    with zipfile.ZipFile(bad, "a") as z:
        info = zipfile.ZipInfo("outputs/link")
        info.create_system = 3
        info.external_attr = 0o120777 << 16
        z.writestr(info, "/etc/passwd")
    r = _verify(bad, demo["pub"])
    assert r.returncode == 8 and "symlink" in r.stderr, r.stderr


def test_duplicate_names_are_refused(demo, tmp_path):
    bad = tmp_path / "a.zip"
    shutil.copy(demo["zip"], bad)
    with pytest.warns(UserWarning):
        with zipfile.ZipFile(bad, "a") as z:
            z.writestr("report.ipynb", b"{}")
    r = _verify(bad, demo["pub"])
    assert r.returncode == 8 and "twice" in r.stderr, r.stderr


def test_zip_bomb_is_refused(demo, tmp_path):
    # Without a signature nothing is read past provenance.json; a bomb the
    # signature lists is refused as a bomb (tests/security/archive_hostile).
    bad = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("inputs/zeros.csv", b"\0" * (64 << 20))
    r = _verify(bad, demo["pub"])
    assert r.returncode == 8 and "provenance.json is missing" in r.stderr, \
        r.stderr


# ---- what an archive needs to re-run -------------------------------------

EXAMPLE = os.path.join(ROOT, "examples", "notebooks",
                       "quarterly-variance.ipynb")


def test_committed_example_packs_into_an_archive_that_reruns(tmp_path):
    out = tmp_path / "example.zip"
    r = run_agent("archive", "pack", EXAMPLE, "-o", str(out), "--no-probe")
    assert r.returncode == 0, r.stderr
    assert "records no inputs" not in r.stderr, r.stderr
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
    for f in sorted(os.listdir(DATA)):
        if f.endswith(".csv"):
            assert "inputs/" + f in names, names
    r = run_agent("archive", "rerun", str(out), "--allow-unsigned",
                  timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 of 6 cells reproduced" in r.stdout, r.stdout


def test_pack_warns_when_a_notebook_records_no_inputs(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("open('data.csv').read()")]
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python",
                                 "display_name": "Python 3"}
    src = tmp_path / "plain.ipynb"
    nbformat.write(nb, str(src))
    r = run_agent("archive", "pack", str(src), "-o",
                  str(tmp_path / "p.zip"), "--no-probe")
    assert r.returncode == 0, r.stderr
    assert "records no inputs" in r.stderr and "--input" in r.stderr, \
        r.stderr
    (tmp_path / "data.csv").write_text("a,b\n")
    r = run_agent("archive", "pack", str(src), "-o",
                  str(tmp_path / "q.zip"), "--no-probe", "--input",
                  str(tmp_path / "data.csv"))
    assert r.returncode == 0 and "records no inputs" not in r.stderr, \
        r.stderr


def test_truncated_archive_is_refused(demo, tmp_path):
    data = demo["zip"].read_bytes()
    bad = tmp_path / "cut.zip"
    bad.write_bytes(data[:len(data) // 2])
    r = _verify(bad, demo["pub"])
    assert r.returncode == 8, r.stderr


def test_rerun_refuses_a_tampered_archive_before_running(demo, tmp_path):
    bad = _rewrite(demo["zip"], tmp_path / "a.zip",
                   drop={"inputs/budget_2026.csv"})
    r = run_agent("archive", "rerun", str(bad), "--trust", demo["pub"])
    _refused(r, "inputs/budget_2026.csv")
    assert "reproduced" not in r.stdout


# ---- a real change is seen -------------------------------------------------

def test_rerun_detects_an_edited_input(demo, tmp_path):
    """Q4 Engineering cloud spend goes up: the cells that compute, print
    and chart variances differ; the cell that only loads and describes the
    data does not."""
    src = (demo["data"] / "actuals_2026_q4.csv").read_text().splitlines()
    rows = [i for i, ln in enumerate(src)
            if ",Engineering," in ln and "Cloud" in ln]
    assert rows, "the demo data has Engineering cloud rows in Q4"
    cols = src[rows[0]].split(",")
    amount = max(range(len(cols)), key=lambda k: _number(cols[k]))
    cols[amount] = str(round(_number(cols[amount]) + 250000, 2))
    src[rows[0]] = ",".join(cols)
    edited = tmp_path / "actuals_2026_q4.csv"
    edited.write_text("\n".join(src) + "\n")
    changed = tmp_path / "changed.zip"
    r = run_agent("archive", "pack", str(demo["nb"]), "-o", str(changed),
                  "--key", demo["key"], "--no-probe", "--input",
                  f"{edited}:actuals_2026_q4.csv")
    assert r.returncode == 0, r.stderr
    env = json.loads(zipfile.ZipFile(changed).read("environment.json"))
    q4 = [i for i in env["inputs"] if i["name"] == "actuals_2026_q4.csv"][0]
    assert q4["recorded_sha256"] != q4["sha256"]
    r = run_agent("archive", "rerun", str(changed), "--trust", demo["pub"],
                  timeout=600)
    assert r.returncode == 9, r.stdout + r.stderr
    assert "of 6 cells reproduced" in r.stdout
    differing = {int(ln.split()[1]) for ln in r.stdout.splitlines()
                 if ln.startswith("cell ")}
    assert differing and len(differing) < 6, r.stdout


def _number(s):
    try:
        return float(s)
    except ValueError:
        return float("-inf")


def test_pack_refuses_an_input_changed_since_the_session(demo, tmp_path):
    nb = json.loads(demo["nb"].read_text())
    moved = tmp_path / "data"
    shutil.copytree(demo["data"], moved)
    for i in nb["metadata"]["jupyter_agent"]["inputs"]:
        i["path"] = str(moved / i["name"])
    (moved / "budget_2026.csv").write_text("department,account\n")
    copy = tmp_path / "report.ipynb"
    copy.write_text(json.dumps(nb))
    r = run_agent("archive", "pack", str(copy), "-o", str(tmp_path / "x.zip"),
                  "--no-probe")
    assert r.returncode == 8, r.stderr
    assert "budget_2026.csv changed since the session" in r.stderr
    assert not (tmp_path / "x.zip").exists()


def test_run_archive_packs_and_reruns(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 6 * 7\nprint(x)"),
                nbformat.v4.new_code_cell("import math\nmath.sqrt(x * x)")]
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python",
                                 "display_name": "Python 3"}
    src = tmp_path / "n.ipynb"
    nbformat.write(nb, str(src))
    key = tmp_path / "k"
    pub = _keygen(key, "ci")
    archive = tmp_path / "n.zip"
    r = run_agent("run", str(src), "-o", str(tmp_path / "out.ipynb"),
                  "--archive", str(archive), "--archive-key", str(key),
                  *SANDBOX_ARGS, timeout=300)
    assert r.returncode == 0, r.stderr
    assert _verify(archive, pub).returncode == 0
    r = run_agent("archive", "rerun", str(archive), "--trust", pub,
                  timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 of 2 cells reproduced" in r.stdout


class _Mcp:
    """A stdio MCP client of our own: one request at a time, each answered
    before the next (notifications in between are skipped)."""

    def __init__(self, *args, cwd=None):
        self.p = subprocess.Popen(
            [os.environ.get("JUPYTER_AGENT_BIN",
                            os.path.join(ROOT, "build", "jupyter-agent")),
             "mcp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=cwd)
        self.n = 0

    def call(self, method, params=None):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method,
               "params": params or {}}
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            assert line, self.p.stderr.read().decode()
            reply = json.loads(line)
            if reply.get("id") == self.n:
                return reply

    def tool(self, name, **args):
        return self.call("tools/call", {"name": name, "arguments": args})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=120)
        return self.p.stderr.read().decode()


def test_mcp_session_archive_reruns(tmp_path):
    """An MCP session's --file inputs, its reset() and its per-call timeout
    are recorded, so its archive re-runs every cell as the session ran."""
    data = tmp_path / "sales.csv"
    data.write_text("region,amount\nnorth,10\nsouth,32\n")
    nb_path = tmp_path / "mcp.ipynb"
    m = _Mcp("--file", str(data), "--notebook", str(nb_path),
             "--timeout", "60", *SANDBOX_ARGS)
    m.call("initialize", {"protocolVersion": "2025-03-26",
                          "capabilities": {},
                          "clientInfo": {"name": "t", "version": "1"}})
    m.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    m.tool("python", code="total = sum(int(l.split(',')[1]) for l in "
           "open('sales.csv').read().split()[1:])\nprint(total)")
    r = m.tool("python", code="import time\nprint('waiting', flush=True)\n"
               "time.sleep(30)\nprint('late')", timeout=2)
    assert r["result"]["structuredContent"]["status"] == "timeout", r
    m.tool("reset")
    m.tool("python", code="print('total' in dir())")
    m.tool("python", code="print(open('sales.csv').read().count('\\n'))")
    m.close()
    nb = json.loads(nb_path.read_text())
    ja = nb["metadata"]["jupyter_agent"]
    assert [i["name"] for i in ja["inputs"]] == ["sales.csv"], ja
    notes = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert any(c["metadata"]["jupyter_agent"].get("action") == "reset"
               for c in notes), notes
    timeouts = [c["metadata"]["jupyter_agent"].get("timeout_s")
                for c in nb["cells"] if c["cell_type"] == "code"]
    assert 2 in timeouts, timeouts
    zip_path = tmp_path / "mcp.zip"
    r = run_agent("archive", "pack", str(nb_path), "-o", str(zip_path),
                  "--no-probe")
    assert r.returncode == 0 and "records no inputs" not in r.stderr, \
        r.stderr
    r = run_agent("archive", "rerun", str(zip_path), "--allow-unsigned",
                  timeout=600)
    ncode = len(timeouts)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "%d of %d cells reproduced" % (ncode, ncode) in r.stdout, r.stdout
