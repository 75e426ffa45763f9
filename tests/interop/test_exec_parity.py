"""The same cells run through jupyter_client/nbclient (the reference) and
through `jupyter-agent exec --json` give the same outputs, after normalising
ids, counts, addresses and colours."""
import json
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import SANDBOX_ARGS, normalise_outputs, run_agent

CELLS = {
    "print": "print('hello')\nprint('world')",
    "stderr-interleaved": "import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')",
    "expression": "6 * 7",
    "dataframe": "import pandas as pd\npd.DataFrame({'dept': ['ops', 'sales'], 'actual': [1.5, 2.25]})",
    "matplotlib": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 1, 3])\nplt.show()",
    "error": "def f():\n    return 1 / 0\nf()",
    "display-update": (
        "from IPython.display import display\n"
        "h = display('first', display_id=True)\n"
        "h.update('second')"),
    "clear-output-wait": (
        "from IPython.display import clear_output\n"
        "for i in range(5):\n"
        "    clear_output(wait=True)\n"
        "    print('step', i)"),
    "html-and-json": (
        "from IPython.display import HTML, JSON, display\n"
        "display(HTML('<b>bold</b>'))\ndisplay(JSON({'a': [1, 2]}))"),
    "unicode": "print('Zürich — 東京 ✓')",
    # one stream message per flushed print: kept apart, as nbclient 0.7 does
    "flushed": ("import sys, time\nfor i in range(3):\n"
                "    sys.stdout.write('%d\\n' % i); sys.stdout.flush()\n"
                "    time.sleep(0.05)"),
}


@pytest.fixture(scope="module")
def reference():
    """Every cell run once by nbclient, each in the same fresh kernel."""
    names = sorted(CELLS)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(CELLS[n]) for n in names]
    NotebookClient(nb, kernel_name="python3", timeout=120,
                   allow_errors=True).execute()
    return {n: c.outputs for n, c in zip(names, nb.cells)}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_exec_json_matches_nbclient(agent_bin, reference, name):
    code = CELLS[name]
    ours = run_agent("exec", *SANDBOX_ARGS, "--json", "-c", code)
    assert ours.returncode in (0, 1), ours.stderr
    result = json.loads(ours.stdout)
    assert result["status"] == ("error" if name == "error" else "ok")
    assert isinstance(result["execution_count"], int)
    assert isinstance(result["duration_ms"], int)
    # Every output we print is a valid nbformat output.
    for o in result["outputs"]:
        nbformat.validate(nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell("x", outputs=[nbformat.from_dict(o)])]))
    assert normalise_outputs(result["outputs"]) == normalise_outputs(
        reference[name])


def test_exec_exit_codes(agent_bin):
    assert run_agent("exec", *SANDBOX_ARGS, "-c", "1").returncode == 0
    assert run_agent("exec", *SANDBOX_ARGS, "-c", "raise ValueError('x')").returncode == 1
    r = run_agent("exec", "--bogus-flag")
    assert r.returncode == 2 and "exec" in r.stderr
    r = run_agent("exec", *SANDBOX_ARGS, "--kernel", "no-such-kernel", "-c", "1")
    assert r.returncode == 3, r.stderr  # a kernel failure (issue 29 item 16)
    assert "no-such-kernel" in r.stderr and "python3" in r.stderr
    r = run_agent("exec", *SANDBOX_ARGS, "--timeout", "1", "-c", "import time; time.sleep(30)")
    assert r.returncode == 6, r.stderr
    assert "timed out after 1 s" in r.stderr


def test_exec_text_mode_and_images(agent_bin, tmp_path):
    code = ("import matplotlib.pyplot as plt\nprint('chart:')\n"
            "plt.figure(figsize=(4, 3), dpi=100); plt.bar(['a', 'b'], [1, 2]); plt.show()")
    r = run_agent("exec", *SANDBOX_ARGS, "--out", str(tmp_path), "-c", code)
    assert r.returncode == 0, r.stderr
    assert "chart:" in r.stdout
    assert re.search(r"\[image/png \d+x\d+ saved to " + re.escape(str(tmp_path))
                     + r"/out-1\.png\]", r.stdout), r.stdout
    assert (tmp_path / "out-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_exec_stdin_code_and_input(agent_bin, tmp_path):
    r = run_agent("exec", *SANDBOX_ARGS, input="print(sum(range(10)))\n")
    assert r.returncode == 0 and r.stdout.strip() == "45", r.stderr
    script = tmp_path / "ask.py"
    script.write_text("name = input('name? ')\nprint('hi', name)\n")
    r = run_agent("exec", *SANDBOX_ARGS, str(script), input="ada\n")
    assert r.returncode == 0, r.stderr
    assert "hi ada" in r.stdout and "name? " in r.stderr


def test_exec_kernel_death_keeps_outputs(agent_bin):
    r = run_agent("exec", *SANDBOX_ARGS, "--json", "-c",
                  "print('before', flush=True)\nimport os, time\ntime.sleep(0.2)\nos._exit(3)")
    assert r.returncode == 3, r.stderr
    result = json.loads(r.stdout)
    assert result["status"] == "died"
    assert "status 3" in result["error"]
    assert result["outputs"][0]["text"] == "before\n"


def test_exec_kernel_that_fails_to_start_shows_its_stderr(agent_bin, tmp_path):
    """A kernel that dies during start-up: exit 3, and the message carries
    what the kernel itself printed, so the user sees why."""
    spec = tmp_path / "kernels" / "broken"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": ["/usr/bin/python3", "-c",
                 "import sys; sys.stderr.write('ModuleNotFoundError: No module "
                 "named kernel_xyz\\n'); sys.exit(3)", "{connection_file}"],
        "display_name": "Broken", "language": "python"}))
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path))
    r = run_agent("exec", *SANDBOX_ARGS, "--kernel", "broken", "-c", "1",
                  env=env)
    assert r.returncode == 3, r.stderr
    assert "failed to start" in r.stderr and "status 3" in r.stderr
    assert "No module named kernel_xyz" in r.stderr
