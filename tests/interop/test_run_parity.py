"""`jupyter-agent run` against the reference: the same notebooks executed by
nbclient 0.7 (in-process) and by our binary (a fresh sandboxed kernel per
run) hold the same outputs after normalising; every notebook we write passes
nbformat.validate and is exactly what nbformat.write would put in the file;
parameters are injected the way papermill injects them; errors, timeouts,
kernel death and Ctrl-C still leave a notebook behind with the right exit
code.

Each `run` starts one sandboxed kernel (about 1.5 s), so notebooks are
shared between tests through module-scoped fixtures."""
import base64
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import (new_code_cell, new_markdown_cell, new_notebook,
                         new_output, new_raw_cell)

from conftest import (BIN, SANDBOX_ARGS, coalesce_streams, normalise_outputs,
                      run_agent)

# A 1x1 PNG, for attachments.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a2b3a5c1"
    "0000000049454e44ae426082")).decode()

STALE = [new_output("stream", name="stdout", text="stale output\n")]

# (name, cell) in notebook order. Code cells run in one kernel, so later
# cells may use earlier ones (display handles).
PARITY_CELLS = [
    ("md-attachment", new_markdown_cell(
        "# Report\n\n![dot](attachment:dot.png)\n",
        attachments={"dot.png": {"image/png": PNG}})),
    ("raw", new_raw_cell(".. note:: raw cells stay as they are\n",
                         metadata={"raw_mimetype": "text/restructuredtext"})),
    ("print", new_code_cell("print('hello')\nprint('world')")),
    ("interleaved", new_code_cell(
        "import sys\nprint('a', flush=True)\n"
        "print('b', file=sys.stderr, flush=True)\nprint('c', flush=True)")),
    ("expression", new_code_cell("6 * 7")),
    ("dataframe", new_code_cell(
        "import pandas as pd\n"
        "pd.DataFrame({'dept': ['ops', 'sales'], 'actual': [1.5, 2.25]})")),
    ("matplotlib", new_code_cell(
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3], [2, 1, 3])\nplt.show()")),
    ("display-early", new_code_cell(
        "from IPython.display import display\n"
        "h = display('first', display_id=True)\n"
        "k = display('keep me', display_id='kept')")),
    ("progress", new_code_cell(
        "from IPython.display import clear_output\n"
        "for i in range(5):\n"
        "    clear_output(wait=True)\n"
        "    print('step', i, flush=True)")),
    ("display-update-later", new_code_cell(
        "h.update('second')\nprint('updated')")),
    ("empty", new_code_cell("  \n\t", outputs=list(STALE),
                            execution_count=41)),
    ("skip", new_code_cell("print('must not run')", outputs=list(STALE),
                           execution_count=42,
                           metadata={"tags": ["skip-execution"]})),
    ("raises-tag", new_code_cell("1 / 0",
                                 metadata={"tags": ["raises-exception"]})),
    ("error-allowed", new_code_cell(
        "def f():\n    raise ValueError('bad value')\nf()")),
    ("after-error", new_code_cell("print('still running')")),
    ("stdin", new_code_cell(
        "try:\n    input('name? ')\nexcept Exception as e:\n"
        "    print(type(e).__name__)")),
    ("unicode", new_code_cell("print('Zürich — 東京 ✓')")),
    # One stream message per flushed print: nbclient 0.7 keeps them apart.
    ("flushed", new_code_cell(
        "import sys, time\nfor i in range(3):\n"
        "    sys.stdout.write('%d\\n' % i); sys.stdout.flush()\n"
        "    time.sleep(0.05)")),
    ("md-last", new_markdown_cell("The end.")),
]
NAMES = [n for n, _ in PARITY_CELLS]
CODE = [n for n, c in PARITY_CELLS if c.cell_type == "code"]
TIMING_KEYS = {"iopub.status.busy", "iopub.execute_input",
               "iopub.status.idle", "shell.execute_reply"}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def write_nb(path, cells, **metadata):
    nb = new_notebook(cells=[nbformat.from_dict(c) for c in cells],
                      metadata=metadata)
    nbformat.write(nb, str(path))
    return str(path)


def read_raw(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def assert_written_like_nbformat(path):
    """Valid, and byte-identical to what nbformat.write makes of it."""
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    assert read_raw(path) == nbformat.writes(nb) + "\n"
    return nb


def run(*args, **kw):
    return run_agent("run", *SANDBOX_ARGS, *args, **kw)


@pytest.fixture(scope="module")
def parity(tmp_path_factory, agent_bin):
    d = tmp_path_factory.mktemp("parity")
    src = write_nb(d / "parity.ipynb", [c for _, c in PARITY_CELLS],
                   kernelspec={"name": "python3", "display_name": "Python 3",
                               "language": "python"})
    ours = run(src, "--allow-errors", "-o", str(d / "ours.ipynb"))
    ref = nbformat.read(src, as_version=4)
    NotebookClient(ref, kernel_name="python3", timeout=120,
                   allow_errors=True).execute()
    return {"src": src, "proc": ours, "out": str(d / "ours.ipynb"),
            "ref": ref}


@pytest.fixture(scope="module")
def ours(parity):
    assert parity["proc"].returncode == 0, parity["proc"].stderr
    return assert_written_like_nbformat(parity["out"])


@pytest.mark.parametrize("name", CODE)
def test_outputs_match_nbclient(parity, ours, name):
    i = NAMES.index(name)
    assert normalise_outputs(ours.cells[i].outputs) == \
        normalise_outputs(parity["ref"].cells[i].outputs)


def test_same_outputs_under_both_engines(parity, ours, tmp_path):
    """The parity notebook run again with every cell in a gVisor kernel
    (--engine gvisor: runsc, one kernel) gives the namespaces run's
    outputs, cell by cell; only the engine in the run record differs."""
    if os.geteuid() != 0 or not shutil.which("runsc"):
        pytest.skip("--engine gvisor needs root and runsc (make test "
                    "installs it)")
    out = tmp_path / "gvisor.ipynb"
    proc = run("--engine", "gvisor", parity["src"], "--allow-errors",
               "-o", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr
    gv = assert_written_like_nbformat(out)
    assert '"engine": "gvisor"' in read_raw(out)  # in the run's metadata
    for name in CODE:
        i = NAMES.index(name)
        assert normalise_outputs(gv.cells[i].outputs) == \
            normalise_outputs(ours.cells[i].outputs), name
        assert gv.cells[i].get("execution_count") == \
            ours.cells[i].get("execution_count"), name


def test_execution_counts_match_nbclient(parity, ours):
    assert [c.get("execution_count") for c in ours.cells] == \
        [c.get("execution_count") for c in parity["ref"].cells]


def test_display_updated_in_a_later_cell_lands_in_the_earlier_cell(ours):
    outs = ours.cells[NAMES.index("display-early")].outputs
    assert [o.data["text/plain"] for o in outs] == ["'second'", "'keep me'"]


def test_clear_output_wait_keeps_only_the_last_step(ours):
    outs = ours.cells[NAMES.index("progress")].outputs
    assert outs == [new_output("stream", name="stdout", text="step 4\n")]


def test_non_code_cells_are_byte_identical(parity):
    src = json.loads(read_raw(parity["src"]))["cells"]
    out = json.loads(read_raw(parity["out"]))["cells"]
    for s, o in zip(src, out):
        if s["cell_type"] != "code":
            assert json.dumps(o, indent=1, sort_keys=True,
                              ensure_ascii=False) == \
                json.dumps(s, indent=1, sort_keys=True, ensure_ascii=False)
    assert len(src) == len(out)


def test_empty_and_skipped_cells_are_left_untouched(parity, ours):
    src = nbformat.read(parity["src"], as_version=4)
    for name in ("empty", "skip"):
        i = NAMES.index(name)
        assert ours.cells[i] == src.cells[i] == parity["ref"].cells[i]


def test_every_executed_cell_has_nbclient_timing(parity, ours):
    for name in CODE:
        i = NAMES.index(name)
        ex = ours.cells[i].metadata.get("execution")
        ref = parity["ref"].cells[i].metadata.get("execution")
        if ref is None:
            assert ex is None, name
            continue
        assert set(ex) == set(ref) == TIMING_KEYS, name
        assert all(ISO.match(v) for v in ex.values()), ex
        assert ex["iopub.status.busy"] <= ex["iopub.execute_input"] <= \
            ex["iopub.status.idle"], ex


def test_notebook_metadata_like_nbclient_plus_our_run_record(parity, ours):
    ref = parity["ref"].metadata
    assert ours.metadata.language_info == ref.language_info
    assert ours.metadata.kernelspec == ref.kernelspec
    rec = ours.metadata.jupyter_agent.run
    assert rec.status == "ok" and rec.kernel == "python3"
    assert rec.cells_executed == rec.cells_total == len(CODE) - 2
    assert rec.errors == 2
    assert rec.parameters == {}
    assert ISO.match(rec.started) and ISO.match(rec.finished)
    assert rec.started <= rec.finished and rec.duration_ms >= 0
    assert rec.sandbox.sandboxed == (SANDBOX_ARGS == [])


def test_progress_lines_name_each_executed_cell(parity):
    lines = [l for l in parity["proc"].stderr.splitlines()
             if l.startswith("[")]
    total = len(CODE) - 2
    want = [f"[{k}/{total}] cell {NAMES.index(n) + 1} "
            for k, n in enumerate(
                [n for n in CODE if n not in ("empty", "skip")], 1)]
    assert [l[:len(w)] for l, w in zip(lines, want)] == want
    assert len(lines) == total


# --- parameters -------------------------------------------------------------

def pm_resolve(value):
    """papermill.cli._resolve_type"""
    if value == "True":
        return True
    if value == "False":
        return False
    if value == "None":
        return None
    for t in (int, float):
        try:
            return t(value)
        except ValueError:
            pass
    return value


def pm_translate(val):
    """papermill.translators.PythonTranslator.translate (no black)."""
    if val is None or isinstance(val, bool):
        return str(val)
    if isinstance(val, str):
        s = val.encode("unicode_escape").decode("utf-8").replace('"', r'\"')
        return f'"{s}"'
    if isinstance(val, float) and not math.isfinite(val):
        return ("float('nan')" if math.isnan(val)
                else "float('-inf')" if val < 0 else "float('inf')")
    return str(val)


def pm_source(params):
    """papermill's injected cell source for an ordered dict of params."""
    return "# Parameters\n" + "".join(
        f"{k} = {pm_translate(pm_resolve(v))}\n" for k, v in params.items())


PARAMS = [
    ("count", "007"), ("big", "-1_000"), ("ratio", "2.5"), ("tiny", "1e-3"),
    ("missing", "nan"), ("low", "-inf"), ("flag", "True"), ("nothing", "None"),
    ("spaced", " 42 "), ("hexish", "0x10"), ("empty", ""),
    ("quote", "O'Brien said \"hi\""), ("path", "C:\\new\\table"),
    ("ctrl", "tab\there\nnext\x7f"), ("world", "Zürich 東京 😀"),
    ("ratio", "3.75"),  # repeated: the last value wins, first position kept
]


@pytest.fixture(scope="module")
def injected(tmp_path_factory, agent_bin):
    d = tmp_path_factory.mktemp("params")
    names = list(dict.fromkeys(n for n, _ in PARAMS))
    src = write_nb(d / "params.ipynb", [
        new_markdown_cell("intro"),
        new_code_cell("count = 1\nratio = 0.5",
                      metadata={"tags": ["parameters"]}),
        new_code_cell("import json\nprint(json.dumps({k: repr(globals()[k])"
                      f" for k in {names!r} if k in globals()}}))"),
    ])
    args = [a for n, v in PARAMS for a in ("-p", n, v)]
    first = run(src, *args, "-o", str(d / "once.ipynb"))
    # Running the result again with other values replaces the injected cell.
    again = run(str(d / "once.ipynb"), "-p", "count", "8",
                "-o", str(d / "twice.ipynb"))
    return {"first": first, "once": str(d / "once.ipynb"),
            "again": again, "twice": str(d / "twice.ipynb"), "names": names}


def test_parameters_cell_is_injected_after_the_parameters_cell(injected):
    assert injected["first"].returncode == 0, injected["first"].stderr
    nb = assert_written_like_nbformat(injected["once"])
    types = [(c.cell_type, c.metadata.get("tags")) for c in nb.cells]
    assert types == [("markdown", None), ("code", ["parameters"]),
                     ("code", ["injected-parameters"]), ("code", None)]
    cell = nb.cells[2]
    assert cell.source == pm_source(dict(PARAMS))
    assert cell.source.splitlines()[0] == "# Parameters"
    assert cell.metadata.tags == ["injected-parameters"]
    assert set(cell.metadata) == {"tags", "execution"}
    assert cell.execution_count == 2
    assert len({c.id for c in nb.cells}) == 4


def test_the_kernel_sees_exactly_the_values_papermill_would_pass(injected):
    nb = nbformat.read(injected["once"], as_version=4)
    seen = json.loads(nb.cells[3].outputs[0].text)
    assert seen == {k: repr(pm_resolve(v)) for k, v in dict(PARAMS).items()}


def test_parameters_are_recorded_in_metadata(injected):
    nb = nbformat.read(injected["once"], as_version=4)
    p = nb.metadata.jupyter_agent.run.parameters
    assert sorted(p) == sorted(injected["names"])  # nbformat sorts keys
    assert p["count"] == 7 and p["ratio"] == 3.75 and p["flag"] is True
    assert p["nothing"] is None and p["world"] == "Zürich 東京 😀"


def test_a_second_run_replaces_the_injected_cell(injected):
    assert injected["again"].returncode == 0, injected["again"].stderr
    nb = assert_written_like_nbformat(injected["twice"])
    tagged = [c for c in nb.cells
              if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and nb.cells.index(tagged[0]) == 2
    assert tagged[0].source == "# Parameters\ncount = 8\n"


def test_an_invalid_parameter_name_is_refused(tmp_path):
    src = write_nb(tmp_path / "n.ipynb", [new_code_cell("1")])
    for bad in ("1x", "a-b", "import", "x;y"):
        proc = run(src, "-p", bad, "1")
        assert proc.returncode == 2 and "parameter name" in proc.stderr
    assert not os.path.exists(tmp_path / "n.out.ipynb")


# --- stopping -----------------------------------------------------------------

def test_first_error_stops_the_run_and_the_notebook_is_written(tmp_path):
    src = write_nb(tmp_path / "err.ipynb", [
        new_code_cell("print('before')"),
        new_code_cell("{}['missing']"),
        new_code_cell("print('after')", outputs=list(STALE),
                      execution_count=7),
    ])
    before = read_raw(src)
    proc = run(src)
    assert proc.returncode == 1, proc.stderr
    assert "cell 2 raised KeyError: 'missing'" in proc.stderr
    assert read_raw(src) == before  # the default output is err.out.ipynb
    nb = assert_written_like_nbformat(tmp_path / "err.out.ipynb")
    assert nb.cells[0].outputs[0].text == "before\n"
    err = nb.cells[1].outputs[-1]
    assert err.output_type == "error" and err.ename == "KeyError"
    assert nb.cells[1].execution_count == 2
    # Not reached: no stale outputs left behind (papermill's behaviour).
    assert nb.cells[2].outputs == [] and nb.cells[2].execution_count is None
    rec = nb.metadata.jupyter_agent.run
    assert rec.status == "error" and rec.stopped_at_cell == 2


def test_a_timeout_interrupts_records_and_exits_6(tmp_path):
    src = write_nb(tmp_path / "slow.ipynb", [
        new_code_cell("print('fast')"),
        new_code_cell("import time\ntime.sleep(60)"),
        new_code_cell("print('never')"),
    ])
    t0 = time.monotonic()
    proc = run(src, "--timeout", "1")
    assert proc.returncode == 6, proc.stderr
    assert time.monotonic() - t0 < 50
    assert "cell 2 timed out after 1 s" in proc.stderr
    nb = assert_written_like_nbformat(tmp_path / "slow.out.ipynb")
    last = nb.cells[1].outputs[-1]
    assert last.ename == "CellTimeoutError" and "1 s" in last.evalue
    assert nb.cells[2].outputs == []
    assert nb.metadata.jupyter_agent.run.status == "timeout"


def test_kernel_death_is_recorded_with_its_reason_and_exits_3(tmp_path):
    src = write_nb(tmp_path / "die.ipynb", [
        new_code_cell("import os, signal\nos.kill(os.getpid(), "
                      "signal.SIGKILL)"),
        new_code_cell("print('never')"),
    ])
    proc = run(src)
    assert proc.returncode == 3, proc.stderr
    nb = assert_written_like_nbformat(tmp_path / "die.out.ipynb")
    err = nb.cells[0].outputs[-1]
    assert err.ename == "DeadKernelError"
    assert "SIGKILL" in err.evalue or "signal 9" in err.evalue
    assert nb.metadata.jupyter_agent.run.status == "died"


def test_ctrl_c_interrupts_writes_what_ran_and_exits_130(tmp_path):
    src = write_nb(tmp_path / "long.ipynb", [
        new_code_cell("print('one')"),
        new_code_cell("import time\nfor i in range(600):\n"
                      "    time.sleep(0.1)"),
        new_code_cell("print('never')"),
    ])
    proc = subprocess.Popen([BIN, "run", *SANDBOX_ARGS, src],
                            stderr=subprocess.PIPE, text=True)
    seen = ""
    while "[1/3]" not in seen:  # cell 1 done, cell 2 starting
        line = proc.stderr.readline()
        assert line, "run ended before cell 2"
        seen += line
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, seen + rest
    nb = assert_written_like_nbformat(tmp_path / "long.out.ipynb")
    assert nb.cells[0].outputs[0].text == "one\n"
    assert nb.cells[1].outputs[-1].ename == "KeyboardInterrupt"
    assert nb.cells[2].execution_count is None
    assert nb.metadata.jupyter_agent.run.status == "interrupted"


# --- where the result goes ----------------------------------------------------

def test_inplace_rewrites_the_input(tmp_path):
    # Also: with no cell tagged parameters, the injected cell goes first.
    src = write_nb(tmp_path / "y.ipynb", [new_code_cell("print(n * 2)")])
    proc = run(src, "--inplace", "-p", "n", "21")
    assert proc.returncode == 0, proc.stderr
    nb = assert_written_like_nbformat(src)
    assert nb.cells[0].metadata.tags == ["injected-parameters"]
    assert nb.cells[1].outputs[0].text == "42\n"
    assert not os.path.exists(tmp_path / "y.out.ipynb")


def test_refuses_to_overwrite_the_input_without_inplace(tmp_path):
    src = write_nb(tmp_path / "z.ipynb", [new_code_cell("print(3)")])
    before = read_raw(src)
    os.symlink("z.ipynb", tmp_path / "alias.ipynb")
    for out in (src, str(tmp_path / "alias.ipynb")):
        proc = run(src, "-o", out)
        assert proc.returncode == 2
        # The input itself: "--inplace"; a link to it is refused as a link
        # (an output path must be a regular file or absent).
        assert "--inplace" in proc.stderr or "symbolic link" in proc.stderr
    assert read_raw(src) == before


def test_unwritable_output_is_refused_before_running(tmp_path):
    src = write_nb(tmp_path / "w.ipynb", [new_code_cell("print(4)")])
    t0 = time.monotonic()
    proc = run(src, "-o", str(tmp_path / "no" / "such" / "dir.ipynb"))
    assert proc.returncode == 2
    assert "cannot write" in proc.stderr and "[1/1]" not in proc.stderr
    assert time.monotonic() - t0 < 1.0  # no kernel was started


@pytest.mark.parametrize("content,message", [
    ('{"cells": [', "invalid JSON at line"),
    ('{"nbformat": 2, "nbformat_minor": 0, "worksheets": []}',
     "nbformat 2; convert it"),
    ('{"cells": [{"cell_type": "code"}], "metadata": {}, "nbformat": 4,'
     ' "nbformat_minor": 5}', "cell 1"),
])
def test_unreadable_notebooks_are_reported(tmp_path, content, message):
    p = tmp_path / "bad.ipynb"
    p.write_text(content)
    proc = run(str(p))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not os.path.exists(tmp_path / "bad.out.ipynb")


def test_unknown_kernel_is_reported(tmp_path):
    src = write_nb(tmp_path / "k.ipynb", [new_code_cell("1")],
                   kernelspec={"name": "nosuchkernel", "display_name": "?"})
    proc = run(src)
    assert proc.returncode == 3  # a kernel failure, as documented
    assert "nosuchkernel" in proc.stderr and "available" in proc.stderr
    assert "--kernel python3" in proc.stderr
    proc = run(src, "--kernel", "alsonot")
    assert proc.returncode == 3 and "alsonot" in proc.stderr


def test_an_agent_session_notebook_reruns_to_the_same_outputs(agent_bin, tmp_path):
    """A report archive's promise: the notebook `ask` recorded for the demo
    re-executes with `run` in a fresh sandbox, from the same input files, to
    the same outputs (after normalising counts, addresses and PNG bytes)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    src = os.path.join(root, "examples", "notebooks", "quarterly-variance.ipynb")
    data = os.path.join(root, "examples", "data")
    files = []
    for name in sorted(os.listdir(data)):
        if name.endswith(".csv"):
            files += ["--file", os.path.join(data, name)]
    out = str(tmp_path / "rerun.ipynb")
    r = run_agent("run", *SANDBOX_ARGS, "-q", src, "-o", out, *files,
                  timeout=300)
    assert r.returncode == 0, r.stderr
    recorded = nbformat.read(src, as_version=4)
    rerun = nbformat.read(out, as_version=4)
    nbformat.validate(rerun)
    # `ask` records streams merged (as a frontend shows them); `run`
    # stores them as nbclient does, so compare them merged.
    before = [normalise_outputs(coalesce_streams(c.outputs))
              for c in recorded.cells if c.cell_type == "code"]
    after = [normalise_outputs(coalesce_streams(c.outputs))
             for c in rerun.cells if c.cell_type == "code"]
    assert len(after) == len(before) == 6
    assert after == before


NBCLIENT_FILES = os.path.join(os.path.dirname(nbformat.__file__), "..",
                              "nbclient", "tests", "files")


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandboxed", "plain"])
def test_ipython_history_is_kept_in_memory_as_nbclient_does(tmp_path,
                                                            sandbox):
    """nbclient's own "Check History in Memory" notebook passes, and
    without the sandbox nothing lands in the user's IPython history."""
    src = os.path.join(NBCLIENT_FILES, "Check History in Memory.ipynb")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "IPYTHONDIR"}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(tmp_path))
    hist = home / ".ipython" / "profile_default" / "history.sqlite"
    # The premise: nbclient runs it and leaves no history file.
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        ref = nbformat.read(src, as_version=4)
        NotebookClient(ref, kernel_name="python3", timeout=120).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert not hist.exists()
    args = ["run", "--no-sandbox"] if not sandbox else ["run"]
    out = str(tmp_path / "out.ipynb")
    r = run_agent(*args, src, "-o", out, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert not hist.exists(), "run wrote the user's IPython history"


def test_flushed_prints_stay_separate_outputs_as_in_nbclient(parity, ours):
    i = NAMES.index("flushed")
    ref = parity["ref"].cells[i].outputs
    assert [o["text"] for o in ref] == ["0\n", "1\n", "2\n"]  # premise
    assert [dict(o) for o in ours.cells[i].outputs] == \
        [dict(o) for o in ref]


def test_merge_streams_joins_them_as_nbconvert_coalesce_streams(
        parity, tmp_path):
    from nbconvert.preprocessors import coalesce_streams as nbconvert_merge
    out = str(tmp_path / "merged.ipynb")
    r = run(parity["src"], "--allow-errors", "--merge-streams", "-o", out)
    assert r.returncode == 0, r.stderr
    merged = assert_written_like_nbformat(out)
    ref, _ = nbconvert_merge(nbformat.from_dict(
        json.loads(json.dumps(parity["ref"]))), {})
    for name in ("flushed", "print", "interleaved"):
        i = NAMES.index(name)
        assert normalise_outputs(merged.cells[i].outputs) == \
            normalise_outputs(ref.cells[i].outputs), name
    assert len(merged.cells[NAMES.index("flushed")].outputs) == 1


def test_an_nbformat_3_notebook_runs_like_nbclient_runs_its_upgrade(tmp_path):
    """nbformat upgrades v3 on read; so does run, then executes it."""
    from nbformat import v3
    ws = v3.new_worksheet(cells=[
        v3.new_heading_cell("Old notebook", level=1),
        v3.new_code_cell(input="print(6 * 7)", prompt_number=9,
                         outputs=[v3.new_output("stream",
                                                output_text="stale\n")]),
    ])
    src = tmp_path / "v3.ipynb"
    src.write_text(v3.writes_json(v3.new_notebook(worksheets=[ws])))
    out = str(tmp_path / "v3.out.ipynb")
    r = run(str(src), "-o", out)
    assert r.returncode == 0, r.stderr
    assert "nbformat 3, upgraded" in r.stderr
    ours = assert_written_like_nbformat(out)
    ref = nbformat.read(str(src), as_version=4)
    NotebookClient(ref, kernel_name="python3", timeout=120).execute()
    assert ours.cells[0].source == ref.cells[0].source == "# Old notebook"
    assert normalise_outputs(ours.cells[1].outputs) == \
        normalise_outputs(ref.cells[1].outputs)
