"""%upload, %download and %reset of the agent kernel, end to end: the real
agent kernel (sandboxed) started by jupyter_client in a directory that
stands for the notebook's, as JupyterLab starts it.

%upload copies files of that directory into /mnt/data under the copy-in
rules (no '..', no symbolic link on the way, regular files only, the
--disk cap); %download copies files and directories of /mnt/data next to
the notebook under the copy-out rules (never overwriting, no dot-files,
no links); %reset restarts Python and keeps /mnt/data, as MCP's reset.
"""
import os
import shutil
import tempfile

import pytest
from jupyter_client.manager import KernelManager

from test_agent_kernel import TIMEOUT, run, spec_prefix  # noqa: F401

DISK = 4 * 1024 * 1024  # --disk for these kernels: the copy-in cap


@pytest.fixture
def nbdir():
    d = tempfile.mkdtemp(prefix="ja-nbdir-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kernel(spec_prefix, nbdir):  # noqa: F811
    km = KernelManager(kernel_name="agent")
    km.start_kernel(cwd=nbdir, extra_arguments=["--disk", "4M"])
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    yield km, kc
    kc.stop_channels()
    if km.is_alive():
        km.shutdown_kernel(now=True)


def text(outs, kind="stream"):
    return "".join(c.get("text", "") for t, c in outs if t == kind)


def error(reply, outs):
    assert reply["status"] == "error", (reply, outs)
    return reply["ename"], reply["evalue"]


def py(kc, code):
    """Run Python in the session; its stdout."""
    reply, outs = run(kc, "%%python\n" + code)
    assert reply["status"] == "ok", (reply, outs)
    return text(outs)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_upload_copies_files_from_the_notebook_directory(kernel, nbdir):
    km, kc = kernel
    write(os.path.join(nbdir, "sales.csv"), b"q,rev\n1,10\n2,12\n")
    os.mkdir(os.path.join(nbdir, "data"))
    write(os.path.join(nbdir, "data", "q1 report.txt"), b"\x00binary\xff")
    reply, outs = run(kc, '%upload sales.csv "data/q1 report.txt"')
    assert reply["status"] == "ok", (reply, outs)
    said = text(outs)
    assert "copied sales.csv (16 bytes) to /mnt/data/sales.csv" in said
    assert "/mnt/data/q1 report.txt" in said
    got = py(kc, "import pandas as pd\n"
                 "print(pd.read_csv('/mnt/data/sales.csv').rev.sum())\n"
                 "print(open('/mnt/data/q1 report.txt','rb').read())")
    assert "22" in got and "\\x00binary\\xff" in got
    # The box's user owns it (it may change or remove it).
    assert "1000" in py(kc, "import os\n"
                            "print(os.stat('/mnt/data/sales.csv').st_uid)")
    # An existing file in /mnt/data is never replaced.
    reply, outs = run(kc, "%upload sales.csv")
    ename, evalue = error(reply, outs)
    assert "sales.csv" in evalue and "exists" in evalue


def test_upload_refuses_hostile_names(kernel, nbdir):
    km, kc = kernel
    outside = tempfile.mkdtemp(prefix="ja-outside-")
    try:
        write(os.path.join(outside, "secret"), b"TOPSECRET")
        os.symlink(os.path.join(outside, "secret"),
                   os.path.join(nbdir, "link"))
        os.symlink(outside, os.path.join(nbdir, "linkdir"))
        os.mkdir(os.path.join(nbdir, "adir"))
        os.mkfifo(os.path.join(nbdir, "fifo"))
        write(os.path.join(nbdir, "huge.bin"), b"x" * (DISK + 1))
        write(os.path.join(nbdir, "ok.txt"), b"fine")
        evil = "evil\x1b]0;pwned\x07"
        write(os.path.join(nbdir, evil), b"e")
        cases = {
            "../" + os.path.basename(outside) + "/secret": "'..'",
            os.path.join(outside, "secret"): "not a path relative",
            "link": "symbolic link",
            "linkdir/secret": "symbolic link",
            "adir": "directory",
            "fifo": "FIFO",
            "huge.bin": "does not fit",
            "missing.csv": "there is no",
        }
        for name, why in cases.items():
            reply, outs = run(kc, f"%upload {name}")
            ename, evalue = error(reply, outs)
            assert why in evalue, (name, evalue)
        # One good name among bad ones is still copied; the cell fails.
        reply, outs = run(kc, "%upload link ok.txt")
        ename, evalue = error(reply, outs)
        assert "symbolic link" in evalue and "ok.txt" in text(outs)
        reply, outs = run(kc, f"%upload '{evil}'")
        ename, evalue = error(reply, outs)
        assert "\x1b" not in evalue and "\x07" not in evalue
        assert "\\e]0;pwned\\x07" in evalue
        listed = py(kc, "import os; print(sorted(set(os.listdir('/mnt/data'))"
                        " - {'out'}))")
        assert listed.strip() == "['ok.txt']", listed
        assert "TOPSECRET" not in py(
            kc, "import subprocess\n"
                "print(subprocess.run(['grep','-r','TOPSECRET','/mnt/data'],"
                "capture_output=True,text=True).stdout)")
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_download_copies_results_next_to_the_notebook(kernel, nbdir):
    km, kc = kernel
    py(kc, "import os\n"
           "open('/mnt/data/chart.txt','w').write('the chart')\n"
           "os.makedirs('/mnt/data/results/deep')\n"
           "open('/mnt/data/results/r.csv','w').write('a,b')\n"
           "open('/mnt/data/results/deep/d.txt','w').write('d')\n"
           "open('/mnt/data/results/.bashrc','w').write('evil')\n"
           "os.symlink('/etc/shadow', '/mnt/data/results/shadow')\n"
           "os.symlink('/etc/passwd', '/mnt/data/plink')\n"
           "os.mkfifo('/mnt/data/results/pipe')\n"
           "os.chmod('/mnt/data/results/r.csv', 0o4755)\n")
    reply, outs = run(kc, "%download chart.txt /mnt/data/results/")
    # Unsafe entries were skipped and named: the cell says so.
    ename, evalue = error(reply, outs)
    assert ".bashrc" in evalue and "shadow" in evalue and "pipe" in evalue
    said = text(outs)
    assert f"to {nbdir}/chart.txt" in said, said
    assert open(os.path.join(nbdir, "chart.txt")).read() == "the chart"
    res = os.path.join(nbdir, "results")
    assert sorted(os.listdir(res)) == ["deep", "r.csv"]
    assert open(os.path.join(res, "deep", "d.txt")).read() == "d"
    assert os.stat(os.path.join(res, "r.csv")).st_mode & 0o7777 == 0o644
    # Never overwritten: the notebook's own file stays as it was.
    write(os.path.join(nbdir, "mine.txt"), b"my own")
    py(kc, "open('/mnt/data/mine.txt','w').write('from the box')")
    for name in ("mine.txt", "chart.txt", "results"):
        reply, outs = run(kc, f"%download {name}")
        ename, evalue = error(reply, outs)
        assert "never overwritten" in evalue or "exists" in evalue, evalue
    assert open(os.path.join(nbdir, "mine.txt")).read() == "my own"
    for name, why in (("plink", "symbolic link"), ("../etc/passwd", "'..'"),
                      ("/etc/passwd", "absolute"),
                      ("nothing.txt", "does not exist")):
        reply, outs = run(kc, f"%download {name}")
        ename, evalue = error(reply, outs)
        assert why in evalue, (name, evalue)
    assert not os.path.exists(os.path.join(nbdir, "plink"))
    assert not os.path.exists(os.path.join(nbdir, "passwd"))


def test_reset_keeps_files(kernel, nbdir):
    km, kc = kernel
    py(kc, "x = 42\nopen('/mnt/data/in.csv','w').write('a')\n"
           "open('/mnt/data/made.txt','w').write('made')")
    reply, outs = run(kc, "%reset")
    assert reply["status"] == "ok", (reply, outs)
    assert "files in /mnt/data were kept" in text(outs)
    got = py(kc, "import os\n"
                 "print(sorted(set(os.listdir('/mnt/data')) - {'out'}))\n"
                 "print('x' in dir())")
    assert "['in.csv', 'made.txt']" in got and "False" in got


def test_magics_without_arguments_say_what_to_give(kernel):
    km, kc = kernel
    for magic in ("%upload", "%download"):
        reply, outs = run(kc, magic)
        ename, evalue = error(reply, outs)
        assert ename == "UsageError" and "e.g." in evalue


def test_upload_and_download_are_in_the_audit_log(spec_prefix, nbdir):  # noqa: F811
    """--audit: %upload is a file_in and %download a file_out, with the
    SHA-256 of the real files on both sides (docs/audit.md)."""
    import hashlib
    import json
    log = os.path.join(nbdir, "audit.log")
    km = KernelManager(kernel_name="agent")
    km.start_kernel(cwd=nbdir, extra_arguments=["--audit", log])
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        data = b"q,rev\n1,10\n"
        write(os.path.join(nbdir, "in.csv"), data)
        reply, outs = run(kc, "%upload in.csv")
        assert reply["status"] == "ok", (reply, outs)
        py(kc, "open('/mnt/data/out.txt', 'w').write('made inside\\n')")
        reply, outs = run(kc, "%download out.txt")
        assert reply["status"] == "ok", (reply, outs)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    recs = [json.loads(x) for x in open(log, "rb").read().splitlines()]
    fin = [r for r in recs if r["type"] == "file_in" and r["via"] == "%upload"]
    fout = [r for r in recs if r["type"] == "file_out"]
    out_real = open(os.path.join(nbdir, "out.txt"), "rb").read()
    assert [r["sha256"] for r in fin] == [hashlib.sha256(data).hexdigest()]
    assert [(r["name"], r["sha256"]) for r in fout] == [
        ("out.txt", hashlib.sha256(out_real).hexdigest())], fout
