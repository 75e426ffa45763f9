"""Crash safety (docs/commands.md): `run` and `ask` rewrite their notebook
atomically after every finished cell, so a SIGKILL of the agent in the
middle of a session leaves a valid notebook holding every finished cell.

Each test starts the agent on three cells, the third of which sleeps, polls
the output file until the second cell's output is there, kills the agent
with SIGKILL and checks the notebook with nbformat.
"""
import json
import os
import signal
import subprocess
import time

import nbformat

from conftest import BIN, SANDBOX_ARGS
from test_ask import FakeLLM, answer, tmp  # noqa: F401 (the fixture)

SLEEPER = "import time\ntime.sleep(120)"


def wait_for_cells(path, proc, want, deadline_s=45):
    """Poll `path` until it parses with `want` (a list of stdout texts) as
    the stream text of its first code cells; the notebook read then."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert proc.poll() is None, "the agent ended early: %s" % (
            proc.stderr.read() if proc.stderr else "")
        try:
            with open(path) as f:
                nb = json.load(f)
        except (OSError, ValueError):
            time.sleep(0.05)
            continue
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        texts = ["".join(o.get("text", "")) for c in code
                 for o in c.get("outputs", []) if o.get("name") == "stdout"]
        if texts[:len(want)] == want:
            return nb
        time.sleep(0.05)
    raise AssertionError("%s never held %r" % (path, want))


def kill_and_check(proc, path, want):
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)  # a valid notebook, not a torn write
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c, text in zip(code, want):
        assert [o.get("text") for o in c.outputs
                if o.output_type == "stream"] == [text], c
        assert c.execution_count is not None
    leftovers = [n for n in os.listdir(os.path.dirname(path))
                 if n.startswith(".") and ".tmp-" in n]
    assert not leftovers, leftovers
    return nb, code


def crash_after_two(proc, out):
    """SIGKILL `proc` once `out` holds the first two cells; check it."""
    try:
        wait_for_cells(out, proc, ["one\n", "two\n"])
        return kill_and_check(proc, out, ["one\n", "two\n"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_sigkill_leaves_every_finished_cell(tmp):  # noqa: F811
    src = os.path.join(tmp, "in.ipynb")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('one')"),
                nbformat.v4.new_markdown_cell("# between"),
                nbformat.v4.new_code_cell("print('two')"),
                nbformat.v4.new_code_cell(SLEEPER),
                nbformat.v4.new_code_cell("print('four')")]
    # Stale outputs from an earlier run: never mixed with the fresh ones.
    nb.cells[4].outputs = [nbformat.v4.new_output("stream", text="stale\n")]
    nb.cells[4].execution_count = 9
    nbformat.write(nb, src)
    out = os.path.join(tmp, "out.ipynb")
    proc = subprocess.Popen([BIN, "run", *SANDBOX_ARGS, "-q", "--timeout",
                             "600", src, "-o", out],
                            stderr=subprocess.PIPE, text=True)
    nb, code = crash_after_two(proc, out)
    assert code[2].outputs == [] and code[3].outputs == []
    assert code[3].execution_count is None, "a stale output survived"
    assert nb.metadata["jupyter_agent"]["run"]["status"] == "running"


def test_ask_sigkill_leaves_every_finished_cell(tmp):  # noqa: F811
    # One turn with three calls: the notebook is saved after each call,
    # not only once the turn is over.
    turn = {"reply": {"text": "Three steps.", "tool_calls": [
        {"name": "python", "arguments": {"code": "print('one')"}},
        {"name": "python", "arguments": {"code": "print('two')"}},
        {"name": "python", "arguments": {"code": SLEEPER}}],
        "usage": {"input_tokens": 10, "output_tokens": 5}}}
    srv = FakeLLM([turn, answer("done")], tmp)
    out = os.path.join(tmp, "s.ipynb")
    proc = subprocess.Popen(
        [BIN, "ask", *SANDBOX_ARGS, "--timeout", "600", "--model",
         "openai:model-x", "-o", out, "count"], env=srv.env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        nb, _ = crash_after_two(proc, out)
    finally:
        srv.stop()
    assert nb.metadata["jupyter_agent"]["status"] == "running"
