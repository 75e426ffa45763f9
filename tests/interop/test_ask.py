"""`jupyter-agent ask` end to end: the CLI against the scripted fake LLM
server (loopback only) and real sandboxed kernels, its notebook checked with
nbformat, files copied out, exit codes, Ctrl-C, --existing on a kernel that
jupyter_client started, and the finance demo's replay (`make demo`'s path).
"""
import base64
import json
import re
import os
import signal
import subprocess
import tempfile
import time

import nbformat
import pytest
from jupyter_client.manager import KernelManager

from conftest import BIN, ROOT, SANDBOX_ARGS

SERVER = os.path.join(ROOT, "tests", "tools", "fake_llm_server.py")
PYTHON = os.environ.get("JUPYTER_AGENT_PYTHON", "/usr/bin/python3")
OKEY = "sk-test-ask-OPENAI-SECRET-93ab"
AKEY = "sk-ant-test-ask-SECRET-71fe"
PROVIDER_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                 "ANTHROPIC_BASE_URL", "JUPYTER_AGENT_MODEL",
                 "JUPYTER_AGENT_STREAM")


class FakeLLM:
    """tests/tools/fake_llm_server.py playing a script, in a temp dir."""

    def __init__(self, script, tmp):
        self.script = os.path.join(tmp, "script.json")
        self.log = os.path.join(tmp, "requests.jsonl")
        with open(self.script, "w") as f:
            json.dump(script, f)
        self.proc = subprocess.Popen(
            [PYTHON, SERVER, "--script", self.script, "--log", self.log],
            stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
        env.update(OPENAI_BASE_URL="http://127.0.0.1:%d/v1" % self.port,
                   ANTHROPIC_BASE_URL="http://127.0.0.1:%d" % self.port,
                   OPENAI_API_KEY=OKEY, ANTHROPIC_API_KEY=AKEY,
                   JUPYTER_AGENT_MAX_TRIES="1", NO_COLOR="1")
        env.update(extra)
        return env

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def tmp():
    with tempfile.TemporaryDirectory(prefix="ja-ask-") as d:
        yield d


def code(text, source):
    return {"reply": {"text": text, "tool_calls": [
        {"name": "python", "arguments": {"code": source}}],
        "usage": {"input_tokens": 1200, "output_tokens": 80}}}


def answer(text):
    return {"reply": {"text": text,
                      "usage": {"input_tokens": 2400, "output_tokens": 150}}}


def ask(args, env, timeout=180):
    return subprocess.run([BIN, "ask", *SANDBOX_ARGS, *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def read_nb(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


CHART = """import pandas as pd, matplotlib.pyplot as plt
df = pd.read_csv('/mnt/data/sales.csv')
ax = df.plot.bar(x='region', y='amount', legend=False)
plt.savefig('/mnt/data/out/by_region.png')
df.to_csv('/mnt/data/out/summary.csv', index=False)
plt.show()
df.describe()"""


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_ask_writes_a_valid_notebook_and_copies_files_out(tmp, provider):
    """The session becomes a valid notebook with the code, its outputs and
    the answer; files saved in /mnt/data/out land in SESSION_files/; no key
    appears anywhere but the request header."""
    csv = os.path.join(tmp, "sales.csv")
    with open(csv, "w") as f:
        f.write("region,amount\nNorth,120\nSouth,80\nWest,95\n")
    srv = FakeLLM([code("Reading the file.", CHART),
                   answer("**North** leads with 120.")], tmp)
    out = os.path.join(tmp, "s.ipynb")
    try:
        r = ask(["--model", provider + ":model-x", "--file", csv, "-o", out,
                 "Which region sells most?"], srv.env())
        reqs = srv.requests()
    finally:
        srv.stop()
    assert r.returncode == 0, r.stderr
    assert "**North** leads with 120." in r.stdout
    assert "notebook: " + out in r.stdout
    nb = read_nb(out)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["markdown", "markdown", "code", "markdown"]
    assert "Which region sells most?" in nb.cells[0].source
    cell = nb.cells[2]
    assert cell.source == CHART and cell.execution_count == 1
    types = [o.output_type for o in cell.outputs]
    assert "display_data" in types and "execute_result" in types
    png = [o for o in cell.outputs if "image/png" in o.get("data", {})]
    assert base64.b64decode(png[0].data["image/png"])[:4] == b"\x89PNG"
    meta = nb.metadata.jupyter_agent
    assert meta["provider"] == provider and meta["status"] == "answered"
    assert meta["usage"]["input_tokens"] == 3600
    files = os.path.join(tmp, "s_files")
    assert sorted(os.listdir(files)) == ["by_region.png", "summary.csv"]
    with open(os.path.join(files, "by_region.png"), "rb") as f:
        assert f.read(4) == b"\x89PNG"
    text = open(out).read()
    for secret in (OKEY, AKEY):
        assert secret not in text
        assert secret not in r.stdout + r.stderr
        assert all(secret not in json.dumps(q["body"]) for q in reqs)
    # The key did travel, in its header: the check above is not vacuous.
    auth = json.dumps([q["headers"] for q in reqs])
    assert (OKEY if provider == "openai" else AKEY) in auth


def test_ask_provider_failure_still_writes_the_notebook(tmp):
    """The model failing mid-session exits 5 and leaves the notebook so
    far, saying where it is."""
    srv = FakeLLM([code("", "x = 6 * 7\nx"),
                   {"status": 503, "body": {"error": {"message": "overloaded"}}}],
                  tmp)
    out = os.path.join(tmp, "partial.ipynb")
    try:
        r = ask(["--model", "openai:model-x", "-o", out, "Compute x"],
                srv.env())
    finally:
        srv.stop()
    assert r.returncode == 5, r.stderr
    assert "overloaded" in r.stderr
    assert out in r.stdout and "the session so far" in r.stdout
    nb = read_nb(out)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code_cells) == 1
    assert code_cells[0].outputs[0]["data"]["text/plain"] == "42"
    assert nb.metadata.jupyter_agent["status"] == "provider_error"


def test_ask_ctrl_c_exits_130_with_the_notebook(tmp):
    """Ctrl-C during a long cell interrupts it, exits 130 and still writes
    the notebook."""
    srv = FakeLLM([code("", "import time\nprint('started', flush=True)\n"
                            "time.sleep(120)"),
                   answer("unreachable")], tmp)
    out = os.path.join(tmp, "int.ipynb")
    p = subprocess.Popen([BIN, "ask", *SANDBOX_ARGS, "--model",
                          "openai:model-x", "-o", out, "Wait a while"],
                         env=srv.env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        deadline = time.time() + 120
        while "started" not in seen and time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            seen += line
        assert "started" in seen, seen
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        srv.stop()
    assert p.returncode == 130, err
    assert "interrupted" in err
    nb = read_nb(out)
    assert nb.metadata.jupyter_agent["status"] == "interrupted"
    assert any(c.cell_type == "code" for c in nb.cells)


def test_ask_max_steps_exits_1_and_says_so(tmp):
    srv = FakeLLM([code("", "a = 1"), code("", "a += 1"), answer("late")], tmp)
    out = os.path.join(tmp, "steps.ipynb")
    try:
        r = ask(["--model", "openai:model-x", "--max-steps", "1", "-o", out,
                 "Count"], srv.env())
    finally:
        srv.stop()
    assert r.returncode == 1
    assert "--max-steps" in r.stderr
    assert read_nb(out).metadata.jupyter_agent["status"] == "max_steps"


def test_ask_usage_errors_exit_2(tmp):
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    assert ask([], env).returncode == 2
    r = ask(["question"], env)
    assert r.returncode == 2 and "OPENAI_API_KEY" in r.stderr
    r = ask(["--model", "replay:" + os.path.join(tmp, "missing.jsonl"), "q"],
            env)
    assert r.returncode == 2
    r = ask(["--max-steps", "zero", "q"], env)
    assert r.returncode == 2


def test_ask_existing_kernel_started_by_jupyter_client(tmp):
    """--existing with no file picks the newest kernel-*.json of the
    runtime dir, warns once that it is not sandboxed, and runs there."""
    runtime = os.path.join(tmp, "runtime")
    os.makedirs(runtime)
    km = KernelManager(kernel_name="python3")
    km.connection_file = os.path.join(runtime, "kernel-test123.json")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        srv = FakeLLM([code("", "ask_was_here = 'yes'\nprint('pid', __import__('os').getpid())"),
                       answer("Set it.")], tmp)
        out = os.path.join(tmp, "existing.ipynb")
        try:
            r = subprocess.run(
                [BIN, "ask", "--existing", "--model", "openai:model-x", "-o",
                 out, "Set a variable"],
                env=srv.env(JUPYTER_RUNTIME_DIR=runtime),
                capture_output=True, text=True, timeout=120)
            reqs = srv.requests()
        finally:
            srv.stop()
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("NOT sandboxed") == 1
        system = json.dumps(reqs[0]["body"]["messages"][0])
        assert "NOT sandboxed" in system
        # The variable lives on in the user's kernel.
        seen = []
        reply = kc.execute_interactive("print(ask_was_here)", timeout=30,
                                       output_hook=lambda m: seen.append(m))
        assert reply["content"]["status"] == "ok"
        texts = [m["content"].get("text", "") for m in seen]
        assert "yes\n" in texts
        meta = read_nb(out).metadata.jupyter_agent
        assert meta["sandbox"]["sandboxed"] is False
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)



def test_demo_replay_end_to_end(tmp):
    """`make demo` without a key: the committed session replays, every
    cell really runs in the sandbox, and the notebook, charts and table
    come out as committed - under the build directory, leaving every
    committed file as it was (a newcomer's `git status` stays clean)."""
    committed = os.path.join(ROOT, "examples", "notebooks")

    def snapshot():
        got = {}
        for dirpath, _, names in os.walk(committed):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    got[path] = f.read()
        return got

    before = snapshot()
    out = os.path.join(tmp, "demo", "quarterly-variance.ipynb")
    env = {k: v for k, v in os.environ.items()
           if k not in PROVIDER_VARS and k != "DEMO_OUT"}
    env.update(BUILD=tmp, JUPYTER_AGENT_BIN=BIN, PYTHON=PYTHON, NO_COLOR="1")
    t0 = time.time()
    r = subprocess.run(["sh", os.path.join(ROOT, "examples", "demo.sh")],
                       env=env, capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    took = time.time() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "replaying the recorded session" in r.stdout
    assert "valid nbformat 4.5 notebook" in r.stdout
    assert snapshot() == before, "the demo rewrote examples/notebooks/"
    closing = r.stdout.rstrip("\n").splitlines()[-1]
    assert out in closing, closing
    nb = read_nb(out)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code_cells) == 6
    errors = [o for c in code_cells for o in c.outputs
              if o.output_type == "error"]
    assert errors == [], errors[0]["evalue"] if errors else ""
    images = [o for c in code_cells for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert len(images) == 3
    with open(os.path.join(ROOT, "examples", "sessions",
                           "quarterly-variance.jsonl")) as f:
        last = [json.loads(line) for line in f][-1]["text"]
    # The report is recorded as written, with currency escaped so that
    # Jupyter's markdown does not read "$34.93M ... $34.56M" as LaTeX.
    assert nb.cells[-1].source.replace("\\$", "$") == last
    assert not re.search(r"(?<!\\)\$\d", nb.cells[-1].source)
    # The report's headline number is what the code computed.
    assert "+366,696" in "".join(o.get("text", "") for o in
                                 code_cells[-1].outputs)
    assert "+$366,696" in last
    files = sorted(os.listdir(os.path.join(tmp, "demo",
                                           "quarterly-variance_files")))
    assert files == ["engineering_cloud_monthly.png",
                     "marketing_q3_by_account.png",
                     "variance_by_line_2026.csv", "variance_heatmap.png"]
    print("demo replay took %.1f s" % took)


def test_agent_kernel_cells_run_the_same_loop(tmp):
    """A plain cell of the agent kernel, driven by jupyter_client: the code
    is shown, its plot forwarded, the answer is the cell's markdown result,
    and the next cell continues the same conversation."""
    script = [code("Computing.", "import matplotlib.pyplot as plt\n"
                                 "plt.plot([1, 2]); plt.show()\nx = 6 * 7\nx"),
              answer("The answer is **42**."),
              code("", "x + 1"),
              answer("Now **43**.")]
    srv = FakeLLM(script, tmp)
    prefix = os.path.join(tmp, "prefix")
    subprocess.run([BIN, "kernelspec", "install", "--prefix", prefix, "--",
                    *SANDBOX_ARGS], check=True, capture_output=True,
                   timeout=30)
    saved = dict(os.environ)
    os.environ.update(srv.env(JUPYTER_PATH=os.path.join(prefix, "share",
                                                        "jupyter"),
                              JUPYTER_AGENT_MODEL="openai:model-x"))
    km = KernelManager(kernel_name="agent")
    try:
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        cells = []
        export = os.path.join(tmp, "from-kernel.ipynb")
        for q in ("What is 6*7?", "%model openai:model-y", "And plus one?",
                  "%%python\nprint('by hand')", f"%export {export}"):
            msgs = []
            reply = kc.execute_interactive(q, timeout=180,
                                           output_hook=msgs.append)
            cells.append((reply["content"], msgs))
        kc.stop_channels()
        reqs = srv.requests()
    finally:
        km.shutdown_kernel(now=True)
        os.environ.clear()
        os.environ.update(saved)
        srv.stop()
    first, msgs = cells[0]
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert first["status"] == "ok", errors
    data = [m["content"]["data"] for m in msgs
            if m["msg_type"] in ("display_data", "execute_result")]
    assert any("```python" in d.get("text/markdown", "") for d in data)
    assert any("image/png" in d for d in data)
    results = [m["content"]["data"] for m in msgs
               if m["msg_type"] == "execute_result"]
    assert results == [{"text/markdown": "The answer is **42**.",
                        "text/plain": "The answer is **42**."}]
    # %model switches the model; the conversation carries over to it.
    switched, msgs_model = cells[1]
    assert switched["status"] == "ok"
    assert any("Model set to openai:model-y" in m["content"].get("text", "")
               for m in msgs_model if m["msg_type"] == "stream")
    assert [r["body"]["model"] for r in reqs] == [
        "model-x", "model-x", "model-y", "model-y"]
    assert "What is 6*7?" in json.dumps(reqs[2]["body"]["messages"])
    second, msgs2 = cells[2]
    assert second["status"] == "ok"
    assert [m["content"]["data"]["text/markdown"] for m in msgs2
            if m["msg_type"] == "execute_result"] == ["Now **43**."]
    assert any(m["content"].get("data", {}).get("text/plain") == "43"
               for m in msgs2 if m["msg_type"] == "display_data")
    # %export writes the whole session: requests, the agent's cells and
    # the %%python cell, as a valid notebook (what `ask -o` writes).
    exported, msgs_export = cells[4]
    assert exported["status"] == "ok", msgs_export
    nb = read_nb(export)
    nbformat.validate(nb)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "What is 6*7?" in md and "And plus one?" in md
    assert "The answer is **42**." in md
    codes = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in codes] == [
        "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()\n"
        "x = 6 * 7\nx", "x + 1", "print('by hand')"]
    assert codes[2].outputs[0]["text"] == "by hand\n"
    assert any(o.output_type == "display_data" and "image/png" in o.data
               for o in codes[0].outputs)
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.metadata.jupyter_agent["model"] == "openai:model-y"


MKWHEEL = r'''
import base64, hashlib, os, sys, zipfile
out, dist, ver = sys.argv[1:4]
def b64(d):
    return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
di = f"{dist}-{ver}.dist-info"
files = {
    f"{dist}/__init__.py": b"def hello():\n    return 'hello from a signed wheel'\n",
    f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {ver}\n".encode(),
    f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
rec = [f"{k},sha256={b64(v)},{len(v)}" for k, v in files.items()] + [f"{di}/RECORD,,"]
files[f"{di}/RECORD"] = ("\n".join(rec) + "\n").encode()
with zipfile.ZipFile(os.path.join(out, f"{dist}-{ver}-py3-none-any.whl"), "w") as z:
    for k, v in files.items():
        z.writestr(zipfile.ZipInfo(k, (2020, 1, 1, 0, 0, 0)), v)
'''


def test_ask_offers_install_packages_only_with_a_signed_manifest(tmp):
    """With --packages DIR the model gets install_packages and can import
    what it installed; without it the tool is not offered at all."""
    wheels = os.path.join(tmp, "wheels")
    os.makedirs(wheels)
    subprocess.run([PYTHON, "-c", MKWHEEL, wheels, "greetpkg", "1.0"],
                   check=True)
    key = os.path.join(tmp, "ops.key")
    subprocess.run([BIN, "manifest", "keygen", "-o", key], check=True,
                   capture_output=True)
    subprocess.run([BIN, "manifest", "sign", "--key", key, wheels],
                   check=True, capture_output=True)
    srv = FakeLLM([
        {"reply": {"text": "", "tool_calls": [
            {"name": "install_packages", "arguments": {"names": ["greetpkg"]}}]}},
        code("", "import greetpkg\nprint(greetpkg.hello())"),
        answer("Installed and imported."),
        answer("Nothing to install here.")], tmp)
    out = os.path.join(tmp, "pk.ipynb")
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    env = srv.env(HOME=home, JUPYTER_AGENT_TRUSTED_KEYS=os.path.join(tmp, "none"))
    try:
        r = ask(["--model", "openai:model-x", "--packages", wheels, "--trust",
                 key + ".pub", "-o", out, "Install greetpkg and use it"], env)
        r2 = ask(["--model", "openai:model-x", "-o",
                  os.path.join(tmp, "plain.ipynb"), "Anything?"], env)
        reqs = srv.requests()
    finally:
        srv.stop()
    assert r.returncode == 0, r.stderr
    names = [t["function"]["name"] for t in reqs[0]["body"]["tools"]]
    assert names == ["python", "list_files", "install_packages"]
    assert "install_packages tool" in reqs[0]["body"]["messages"][0]["content"]
    tool_msgs = [m for m in reqs[1]["body"]["messages"] if m["role"] == "tool"]
    assert "installed greetpkg 1.0" in tool_msgs[-1]["content"]
    assert "hello from a signed wheel" in r.stdout
    assert r2.returncode == 0, r2.stderr
    names = [t["function"]["name"] for t in reqs[3]["body"]["tools"]]
    assert names == ["python", "list_files"]


def test_ask_record_then_replay_gives_the_same_session(tmp):
    """--record writes the model's turns; --model replay:FILE plays them
    back offline, running the same code to the same notebook cells."""
    srv = FakeLLM([code("Squaring.", "print(sum(i * i for i in range(10)))"),
                   answer("The sum of squares is **285**.")], tmp)
    rec = os.path.join(tmp, "session.jsonl")
    live = os.path.join(tmp, "live.ipynb")
    try:
        r = ask(["--model", "anthropic:model-x", "--record", rec, "-o", live,
                 "Sum of squares below 10?"], srv.env())
    finally:
        srv.stop()
    assert r.returncode == 0, r.stderr
    assert OKEY not in open(rec).read() and AKEY not in open(rec).read()
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    again = os.path.join(tmp, "again.ipynb")
    r2 = ask(["--model", "replay:" + rec, "-o", again,
              "Sum of squares below 10?"], env)
    assert r2.returncode == 0, r2.stderr
    a, b = read_nb(live), read_nb(again)
    assert [c.source for c in a.cells] == [c.source for c in b.cells]
    assert b.cells[2].outputs[0]["text"] == "285\n"
    assert b.metadata.jupyter_agent["provider"] == "replay"
    assert b.metadata.jupyter_agent["model"] == "anthropic:model-x"
