"""Kernelspecs that name their program without a full path start the way
jupyter_client starts them: `python` is the Jupyter stack's interpreter
(jupyter_client's sys.executable), any other bare name is found on PATH,
and a sandboxed kernel's program must also be visible inside the box.

The peer is jupyter_client's KernelManager, started on the same kernelspec
directory: what it can start, `exec` starts too."""
import json
import os
import pathlib
import shutil
import stat
import tempfile

import pytest
from jupyter_client.manager import KernelManager

from conftest import BIN, run_agent

PYTHON = os.environ.get("JUPYTER_AGENT_PYTHON", "/usr/bin/python3")

# The kernel.json every ipykernel wheel installs (pip, venv, conda).
PIP_SPEC = {"argv": ["python", "-m", "ipykernel_launcher", "-f",
                     "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"}


def write_spec(root, name, spec):
    d = os.path.join(root, "kernels", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "kernel.json"), "w") as f:
        json.dump(spec, f)
    return d


@pytest.fixture
def jpath(tmp_path):
    """A private JUPYTER_PATH, HOME and runtime dir."""
    env = dict(os.environ)
    env.update(JUPYTER_PATH=str(tmp_path / "share"), HOME=str(tmp_path),
               JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               JUPYTER_AGENT_PYTHON=PYTHON)
    return tmp_path, env


def jupyter_client_runs(name, env, code):
    """What jupyter_client's KernelManager prints for `code` on kernel
    `name` (it must start: that is the premise of the test)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    km = KernelManager(kernel_name=name)
    try:
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        out = []
        kc.execute_interactive(
            code, timeout=60,
            output_hook=lambda m: out.append(m["content"].get("text", "")))
        kc.stop_channels()
        return "".join(out)
    finally:
        km.shutdown_kernel(now=True)
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandboxed", "plain"])
def test_pip_installed_python_kernelspec_starts_like_jupyter_client(
        jpath, sandbox):
    tmp, env = jpath
    write_spec(str(tmp / "share"), "pipkernel", PIP_SPEC)
    code = "import sys; print('hello from', sys.version_info[0])"
    want = jupyter_client_runs("pipkernel", env, code)
    assert want == "hello from 3\n"
    args = ["exec", "--kernel", "pipkernel", "--warm", "cold", "-c", code]
    if not sandbox:
        args.insert(1, "--no-sandbox")
    r = run_agent(*args, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want


def test_a_bare_program_name_is_found_on_path_like_jupyter_client(jpath,
                                                                 request):
    """A kernelspec naming `mykernel` runs the `mykernel` found on PATH
    (here a wrapper script starting ipykernel), as Popen finds it."""
    tmp, env = jpath
    # Not under /tmp: the box has its own /tmp, where nothing can be bound.
    bindir = pathlib.Path(tempfile.mkdtemp(prefix="ja-bin-", dir="/var/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(bindir, ignore_errors=True))
    bindir.chmod(0o755)  # the box user is not root
    script = bindir / "mykernel"
    script.write_text("#!/bin/sh\nexec %s -m ipykernel_launcher \"$@\"\n"
                      % PYTHON)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP
                 | stat.S_IXOTH)
    write_spec(str(tmp / "share"), "onpath",
               {"argv": ["mykernel", "-f", "{connection_file}"],
                "display_name": "on PATH", "language": "python"})
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", "/usr/bin:/bin"))
    code = "print(6 * 7)"
    assert jupyter_client_runs("onpath", env, code) == "42\n"
    r = run_agent("exec", "--no-sandbox", "--kernel", "onpath", "-c", code,
                  env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42\n"
    # Sandboxed, the program must be visible inside the box: a script in
    # a private directory is not, and the message says what to do.
    r = run_agent("exec", "--kernel", "onpath", "--warm", "cold", "-c", code,
                  env=env)
    assert r.returncode == 4, r.stderr
    assert str(script) in r.stderr and "--bind %s" % bindir in r.stderr
    # ... and doing what it says makes it run sandboxed.
    r = run_agent("exec", "--bind", str(bindir), "--kernel", "onpath",
                  "--warm", "cold", "-c", code, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42\n"


def test_a_program_not_on_path_is_reported_with_the_path_searched(jpath):
    tmp, env = jpath
    write_spec(str(tmp / "share"), "nowhere",
               {"argv": ["no-such-kernel-program", "{connection_file}"],
                "display_name": "nowhere", "language": "python"})
    env["PATH"] = "/usr/bin:/bin"
    with pytest.raises(Exception):
        jupyter_client_runs("nowhere", env, "1")
    r = run_agent("exec", "--no-sandbox", "--kernel", "nowhere", "-c", "1",
                  env=env)
    assert r.returncode == 3
    assert "'no-such-kernel-program'" in r.stderr
    assert "not on PATH (/usr/bin:/bin)" in r.stderr


@pytest.mark.skipif(not os.path.exists("/usr/share/jupyter/kernels/ir"),
                    reason="Debian's r-cran-irkernel is not installed")
def test_debian_irkernel_spec_naming_R_starts_without_the_sandbox(jpath):
    """Debian's IRkernel spec says `"argv": ["R", ...]`."""
    tmp, env = jpath
    env["JUPYTER_PATH"] = "/usr/share/jupyter"
    assert shutil.which("R", path=env["PATH"])
    r = run_agent("exec", "--no-sandbox", "--kernel", "ir", "-c",
                  "cat(6 * 7, '\\n')", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42 \n"
