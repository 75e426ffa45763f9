"""The agent kernel in a real browser: Debian's classic Notebook server
(jupyter-notebook 6.4) on 127.0.0.1 and Debian's headless Chromium, driven
by playwright-core (tests/browser/notebook.mjs; `npm ci` there when
node_modules is missing, no browser is ever downloaded).

A user opens a notebook whose kernelspec is ours, types a request in the
first cell and presses Shift+Enter; the scripted fake LLM answers with a
tool call that plots with matplotlib and then with a markdown answer. The
page must show the chart and the answer; a %%python cell must print into
the page; the notebook saved by the frontend must hold those outputs. The
screenshot goes to tests/artifacts/browser-notebook.png; with
JA_UPDATE_README_IMAGE=1 (and the default sandboxed mode) it also replaces
docs/images/agent-kernel-notebook.png, the README's picture. Only on
purpose: fonts and timing change pixels, and a test run must leave the
checkout as it found it.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

import nbformat
import pytest

from conftest import ROOT, SANDBOX_ARGS
from frontend_helpers import (ANSWER, ANSWER_PLAIN, CHART_CODE, KERNEL_NAME,
                              REQUEST, JupyterEnv, answer, code, user_messages,
                              wait_until)

BROWSER_DIR = os.path.join(ROOT, "tests", "browser")
CHROMIUM = "/usr/bin/chromium"
NOTEBOOK_SERVER = "/usr/bin/jupyter-notebook"
ARTIFACT = os.path.join(ROOT, "tests", "artifacts", "browser-notebook.png")
README_IMAGE = os.path.join(ROOT, "docs", "images", "agent-kernel-notebook.png")
NOTEBOOK = "Quarterly revenue.ipynb"
PYTHON_CELL = "%%python\nprint('python says', 6 * 7)"
PYTHON_EXPECT = "python says 42"


def prerequisites():
    """The tools this test needs, or skip saying which one is missing."""
    for path, pkg in ((CHROMIUM, "chromium"),
                      (NOTEBOOK_SERVER, "jupyter-notebook")):
        if not os.access(path, os.X_OK):
            pytest.skip(f"{path} is missing: install Debian's {pkg} "
                        "(tools/install-deps)")
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        pytest.skip("node is missing: install Debian's nodejs")
    modules = os.path.join(BROWSER_DIR, "node_modules", "playwright-core")
    if not os.path.isdir(modules):
        if npm is None:
            pytest.skip("npm is missing (needed once for `npm ci` in "
                        "tests/browser): install Debian's npm")
        env = dict(os.environ, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
        r = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit",
                            "--no-fund"], cwd=BROWSER_DIR, env=env,
                           capture_output=True, text=True, timeout=300)
        # A registry we cannot reach is a missing prerequisite; a broken
        # lock file is not, so only network errors skip.
        if r.returncode != 0 and re.search(
                r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|network",
                r.stderr):
            pytest.skip("`npm ci` in tests/browser could not reach the npm "
                        "registry: " + r.stderr.strip().splitlines()[-1])
        assert r.returncode == 0, r.stderr
    return node


def start_notebook_server(env, notebook_dir, log_path):
    """jupyter-notebook on 127.0.0.1, no token or password, first free
    port from a random start; returns (process, base URL)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [NOTEBOOK_SERVER, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--port-retries=50", "--NotebookApp.token=",
         "--NotebookApp.password=", f"--notebook-dir={notebook_dir}",
         "--MappingKernelManager.cull_idle_timeout=0",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    log.close()
    url = re.compile(r"http://127\.0\.0\.1:(\d+)/")

    def started():
        if proc.poll() is not None:
            return True
        with open(log_path) as f:
            text = f.read()
        return "is running at" in text and url.search(text)

    wait_until(started, 60)
    with open(log_path) as f:
        text = f.read()
    if proc.poll() is not None or "is running at" not in text:
        stop(proc)
        pytest.fail("jupyter-notebook did not start:\n" + text[-3000:])
    return proc, "http://127.0.0.1:%s" % url.search(text).group(1)


def stop(proc, sig=signal.SIGTERM):
    """Stop a process group we started; SIGKILL if it does not go."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def write_notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": KERNEL_NAME,
                                 "display_name": "Agent (sandboxed Python)",
                                 "language": "markdown"}
    nb.cells.append(nbformat.v4.new_code_cell(""))
    nbformat.write(nb, path)


def test_notebook_in_chromium_plots_answers_and_runs_python():
    node = prerequisites()
    jenv = JupyterEnv([code("Plotting revenue by quarter.", CHART_CODE),
                       answer(ANSWER)])
    server = driver = None
    try:
        nbdir = os.path.join(jenv.work, "notebooks")
        os.makedirs(nbdir)
        write_notebook(os.path.join(nbdir, NOTEBOOK))
        server_log = os.path.join(jenv.root, "notebook-server.log")
        server, base = start_notebook_server(jenv.env(), nbdir, server_log)
        os.makedirs(os.path.dirname(ARTIFACT), exist_ok=True)
        shots = [ARTIFACT, os.path.join(jenv.root, "shot.png")]
        cfg = {"base": base, "notebook": NOTEBOOK, "chromium": CHROMIUM,
               "profile": tempfile.mkdtemp(prefix="profile-", dir=jenv.root),
               "request": REQUEST, "answer": ANSWER_PLAIN,
               "python": PYTHON_CELL, "python_expect": PYTHON_EXPECT,
               "screenshots": shots,
               "failshot": ARTIFACT.replace(".png", "-failure.png")}
        driver = subprocess.Popen(
            [node, os.path.join(BROWSER_DIR, "notebook.mjs"), json.dumps(cfg)],
            cwd=BROWSER_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
            env=dict(os.environ, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1"))
        out, err = driver.communicate(timeout=300)
        kernels_while_open = jenv.kernels()
        with open(server_log) as f:
            server_text = f.read()
        assert out.strip(), f"the driver printed nothing; stderr:\n{err}"
        view = json.loads(out.strip().splitlines()[-1])
        assert "error" not in view, (view, server_text[-3000:])
        # The browser asked nothing of the world beyond 127.0.0.1.
        assert view["blocked"] == []
        assert view["kernel_name"] == KERNEL_NAME
        assert len(kernels_while_open) == 1, kernels_while_open

        first, second = view["cells"]
        assert first["input"] == REQUEST
        # The chart is a real decoded PNG in the page.
        assert len(first["images"]) == 1, first
        img = first["images"][0]
        assert img["src"].startswith("data:image/png;base64")
        assert img["width"] >= 500 and img["height"] >= 200, img
        # The code the model ran is shown, and the answer is rendered
        # markdown (bold became <strong>), not raw text.
        texts = "\n".join(o["text"] for o in first["outputs"])
        assert "revenue.plot.bar" in texts
        assert "<strong>1.82M</strong>" in "".join(first["markdown"])
        assert ANSWER_PLAIN in texts
        assert "**" not in texts
        # The %%python cell printed into the page.
        assert second["input"] == PYTHON_CELL
        assert [o["text"].strip() for o in second["outputs"]] == [PYTHON_EXPECT]

        # The model saw the user's words; the %%python cell cost no request.
        reqs = jenv.llm.requests()
        assert len(reqs) == 2
        assert any(REQUEST in t for t in user_messages(reqs[:1]))

        # What the frontend saved is a valid notebook with those outputs.
        nb = nbformat.read(os.path.join(nbdir, NOTEBOOK), as_version=4)
        nbformat.validate(nb)
        outs = nb.cells[0].outputs
        assert any("image/png" in o.get("data", {}) for o in outs)
        # ... the chart's data next to its PNG (docs/outputs.md), which the
        # page rendered as the image above and nbformat accepts
        charts = [o.data["application/vnd.jupyter-agent.chart+json"]
                  for o in outs if "application/vnd.jupyter-agent.chart+json"
                  in o.get("data", {})]
        assert [c["charts"][0]["type"] for c in charts] == ["bar"], charts
        assert [o.data["text/markdown"] for o in outs
                if o.output_type == "execute_result"] == [ANSWER]
        assert "".join(o.get("text", "") for o in nb.cells[1].outputs) \
            == PYTHON_EXPECT + "\n"

        # The README shows the default, sandboxed kernel (its menu name
        # says so); a --no-sandbox run keeps only the artifact.
        if not SANDBOX_ARGS and os.environ.get("JA_UPDATE_README_IMAGE"):
            shutil.copyfile(shots[1], README_IMAGE)
        with open(ARTIFACT, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        stop(driver, signal.SIGKILL)
        stop(server)
        # The server's shutdown takes the kernel (and its sandbox) along.
        gone = wait_until(lambda: jenv.kernel_pids() == [], 30)
        left = jenv.kernel_pids()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        jenv.close()
    assert gone, f"kernel processes left after the server stopped: {left}"
