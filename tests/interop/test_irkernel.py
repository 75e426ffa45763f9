"""A non-Python kernel in the sandbox: Debian's IRkernel (r-cran-irkernel,
installed by tools/install-deps), started from its own kernelspec
(/usr/share/jupyter/kernels/ir, whose program is the bare name "R").

R reads its packaged configuration (/etc/R: ldpaths, Renviron) at start;
the box shows it because the kernelspec's language has a runtime profile
(kb_kernelspec_runtime_paths). `run` on a small R notebook is compared with
nbclient running the same notebook on the same kernelspec."""
import base64
import json
import os

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from conftest import normalise_outputs, run_agent

SPEC = "/usr/share/jupyter/kernels/ir/kernel.json"


@pytest.fixture(scope="module", autouse=True)
def irkernel():
    assert os.path.exists(SPEC), (
        "Debian's r-cran-irkernel is missing; make test installs it "
        "(tools/install-deps)")


def r_exec(*args, code, input=None, timeout=180):
    return run_agent("exec", "--kernel", "ir", "--warm", "cold", *args,
                     "-c", code, input=input, timeout=timeout)


def test_r_says_hello_in_the_sandbox():
    r = r_exec(code='cat("hello from R", R.version$major, "\\n")')
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("hello from R 4")


def test_r_data_frame_comes_back_as_a_table():
    r = r_exec("--json", code='data.frame(dept = c("ops", "sales"), '
                              'actual = c(1.5, 2.25))')
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "ok"
    data = [o["data"] for o in out["outputs"] if "data" in o]
    assert any("<table" in d.get("text/html", "") and
               "sales" in d.get("text/html", "") for d in data), data
    assert any("2.25" in d.get("text/plain", "") for d in data)


def test_r_plot_comes_back_as_png(tmp_path):
    r = r_exec("--out", str(tmp_path), code="plot(1:10, main = 'line')")
    assert r.returncode == 0, r.stderr
    pngs = sorted(p for p in os.listdir(tmp_path) if p.endswith(".png"))
    assert pngs, r.stdout
    with open(tmp_path / pngs[0], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_r_error_is_reported_with_exit_1():
    r = r_exec(code='stop("budget file is missing")')
    assert r.returncode == 1
    assert "budget file is missing" in r.stdout + r.stderr


def test_r_timeout_interrupts_and_exits_6():
    r = r_exec("--timeout", "3",
               code='cat("start\\n"); Sys.sleep(60); cat("never\\n")')
    assert r.returncode == 6, r.stderr
    assert "start" in r.stdout and "never" not in r.stdout
    # Interrupted (R stops Sys.sleep on SIGINT); on a loaded machine the
    # 5 s grace may pass first and the kernel is killed instead: either
    # way the message names the interrupt.
    assert "interrupt" in r.stderr


def test_r_readline_reads_our_standard_input():
    r = r_exec(code='x <- readline("name? "); cat("hi", x, "\\n")',
               input="Ada\n")
    assert r.returncode == 0, r.stderr
    assert "hi Ada" in r.stdout


def test_run_on_an_r_notebook_matches_nbclient(tmp_path):
    nb = new_notebook(metadata={"kernelspec": {
        "name": "ir", "display_name": "R", "language": "R"}})
    nb.cells = [
        new_markdown_cell("# Quarterly numbers in R"),
        new_code_cell('cat("hello\\n")\nprint(1:3)'),
        new_code_cell('df <- data.frame(q = c("Q1", "Q2"), v = c(10, 12.5))\n'
                      'df'),
        new_code_cell("sum(df$v)"),
        new_code_cell("plot(df$v)"),
        new_code_cell('message("to stderr")'),
    ]
    src = str(tmp_path / "r.ipynb")
    nbformat.write(nb, src)
    out = str(tmp_path / "r.out.ipynb")
    r = run_agent("run", src, "-o", out, timeout=300)
    assert r.returncode == 0, r.stderr
    ours = nbformat.read(out, as_version=4)
    nbformat.validate(ours)
    ref = nbformat.read(src, as_version=4)
    NotebookClient(ref, kernel_name="ir", timeout=120).execute()
    for i, (mine, theirs) in enumerate(zip(ours.cells, ref.cells)):
        if mine.cell_type != "code":
            continue
        assert normalise_outputs(mine.outputs) == \
            normalise_outputs(theirs.outputs), "cell %d differs" % (i + 1)
    pngs = [o for o in ours.cells[4].outputs
            if "image/png" in o.get("data", {})]
    assert pngs and base64.b64decode(
        pngs[0]["data"]["image/png"])[:4] == b"\x89PNG"
    assert ours.metadata["language_info"]["name"] == "R"
