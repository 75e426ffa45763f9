"""Notebook benchmarks: nb_notebook vs nbformat, `jupyter-agent run` vs
nbclient. Prints tables with ratios (> 1: ours is faster) and appends one
JSON line per benchmark to $BENCH_RESULTS when set.

    notebook_bench.py io     read+write a 10 000-cell notebook with images:
                             bench/notebook_io (C) vs nbformat.reads+writes
                             (as users call them: both validate) and vs
                             nbformat without the schema validation;
                             wall and CPU time (the CPU ratio moves less
                             on a busy machine)
    notebook_bench.py run    a 30-cell notebook executed end to end, kernel
                             start included, each run a fresh process:
                             `jupyter-agent run` (sandboxed, and
                             --no-sandbox) vs nbclient (NotebookClient)

Environment: BUILD (build dir, default "build"), QUICK=1 (smaller counts),
NOTEBOOK_CELLS (io, default 10000), NOTEBOOK_ROUNDS (io, default 5),
RUN_ROUNDS (run, default 5). Benchmarks measure, never assert.
"""
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
BUILD = os.environ.get("BUILD", "build")
QUICK = os.environ.get("QUICK", "") not in ("", "0")


def record(obj):
    path = os.environ.get("BENCH_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(obj) + "\n")


def ms(us):
    return us / 1000.0


# --- io ---------------------------------------------------------------------

def make_big_notebook(path, ncells):
    """A notebook shaped like a long analysis: markdown, code with stream
    output, HTML tables, and a PNG every 10th code cell (~6 KB each)."""
    import nbformat
    from nbformat.v4 import (new_code_cell, new_markdown_cell, new_notebook,
                             new_output)

    rnd = random.Random(42)
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(
        rnd.getrandbits(8) for _ in range(4500))).decode()
    cells = []
    for i in range(ncells):
        if i % 5 == 0:
            cells.append(new_markdown_cell(
                "## Step %d\n\nVariance of *%s* against plan, by region.\n" % (i, "q%d" % (i % 4))))
            continue
        src = "df_%d = load(%d)\nsummary(df_%d).head()\n" % (i, i, i)
        if i % 10 == 1:
            outs = [new_output("display_data", data={
                "image/png": png, "text/plain": "<Figure size 640x480 with 1 Axes>"})]
        elif i % 3 == 0:
            rows = "".join("<tr><td>%d</td><td>%.2f</td></tr>\n" % (r, rnd.random() * 1e4)
                           for r in range(8))
            outs = [new_output("execute_result", execution_count=i, data={
                "text/html": "<table>\n%s</table>\n" % rows,
                "text/plain": "   id  value\n" + "\n".join("%d  %.2f" % (r, r * 1.5) for r in range(8))})]
        else:
            outs = [new_output("stream", name="stdout",
                               text="".join("line %d of cell %d: ok\n" % (k, i) for k in range(5)))]
        cells.append(new_code_cell(src, outputs=outs, execution_count=i))
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, path)


def nbformat_io(path, rounds):
    """nbformat.reads + nbformat.writes, and the same without validation."""
    import nbformat
    from nbformat import reader

    with open(path, encoding="utf-8") as f:
        text = f.read()
    res = {"reads_us": [], "writes_us": [], "raw_reads_us": [], "raw_writes_us": [],
           "read_cpu_us": [], "write_cpu_us": []}
    identical = True
    for _ in range(rounds):
        c0 = sum(benchlib.cpu_us())
        t0 = benchlib.now_us()
        nb = nbformat.reads(text, as_version=4)
        t1 = benchlib.now_us()
        c1 = sum(benchlib.cpu_us())
        out = nbformat.writes(nb)
        t2 = benchlib.now_us()
        c2 = sum(benchlib.cpu_us())
        res["read_cpu_us"].append(c1 - c0)
        res["write_cpu_us"].append(c2 - c1)
        identical = identical and out + "\n" == text
        nb2 = nbformat.convert(reader.reads(text), 4)
        t3 = benchlib.now_us()
        nbformat.versions[4].writes_json(nb2)
        t4 = benchlib.now_us()
        res["reads_us"].append(t1 - t0)
        res["writes_us"].append(t2 - t1)
        res["raw_reads_us"].append(t3 - t2)
        res["raw_writes_us"].append(t4 - t3)
    res["identical"] = identical
    return res


def cmd_io():
    ncells = benchlib.env_int("NOTEBOOK_CELLS", 2000 if QUICK else 10000)
    rounds = benchlib.env_int("NOTEBOOK_ROUNDS", 2 if QUICK else 5)
    tmp = tempfile.mkdtemp(prefix="ja-nbio-")
    path = os.path.join(tmp, "big.ipynb")
    make_big_notebook(path, ncells)
    size = os.path.getsize(path)
    print("\n== notebook_io: read + write a %d-cell notebook (%.1f MB, a PNG every "
          "10th code cell), in memory, median of %d rounds" % (ncells, size / 1e6, rounds))
    prog = os.path.join(BUILD, "bench", "notebook_io")
    try:
        p = subprocess.run([prog, path, "-n", str(rounds)], capture_output=True, text=True)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        ours = json.loads(lines[-1]) if lines else {"error": p.stderr.strip() or "no output"}
    except OSError as e:
        ours = {"error": "%s: %s (run 'make BUILD=%s all')" % (prog, e.strerror, BUILD)}
    ref = nbformat_io(path, rounds)
    os.remove(path)
    os.rmdir(tmp)
    if "error" in ours:
        print("  ours failed: %s" % ours["error"])
        record({"bench": "notebook_io", "ours": ours})
        return 1
    o_r, o_w = benchlib.median(ours["read_us"]), benchlib.median(ours["write_us"])
    n_r, n_w = benchlib.median(ref["reads_us"]), benchlib.median(ref["writes_us"])
    r_r, r_w = benchlib.median(ref["raw_reads_us"]), benchlib.median(ref["raw_writes_us"])
    print("  %-44s %10s %10s %10s" % ("", "read ms", "write ms", "total ms"))
    print("  %-44s %10.1f %10.1f %10.1f" % ("jupyter-agent nb_notebook (C)", ms(o_r), ms(o_w), ms(o_r + o_w)))
    print("  %-44s %10.1f %10.1f %10.1f" % ("nbformat.reads + nbformat.writes", ms(n_r), ms(n_w), ms(n_r + n_w)))
    print("  %-44s %10.1f %10.1f %10.1f" % ("nbformat, schema validation skipped", ms(r_r), ms(r_w), ms(r_r + r_w)))
    ratio = (n_r + n_w) / max(1, o_r + o_w)
    ratio_raw = (r_r + r_w) / max(1, o_r + o_w)
    print("  ratio vs nbformat: read %.1fx, write %.1fx, total %.1fx; vs nbformat without "
          "validation: total %.1fx" % (n_r / max(1, o_r), n_w / max(1, o_w), ratio, ratio_raw))
    # CPU time (user + system) of each process over the same calls: on a
    # busy shared machine it moves less than wall time.
    oc_r, oc_w = benchlib.median(ours["read_cpu_us"]), benchlib.median(ours["write_cpu_us"])
    nc_r, nc_w = benchlib.median(ref["read_cpu_us"]), benchlib.median(ref["write_cpu_us"])
    print("  %-44s %10s %10s %10s" % ("CPU time, median", "read ms", "write ms", "total ms"))
    print("  %-44s %10.1f %10.1f %10.1f" % ("jupyter-agent nb_notebook (C)", ms(oc_r), ms(oc_w), ms(oc_r + oc_w)))
    print("  %-44s %10.1f %10.1f %10.1f" % ("nbformat.reads + nbformat.writes", ms(nc_r), ms(nc_w), ms(nc_r + nc_w)))
    ratio_cpu = (nc_r + nc_w) / max(1, oc_r + oc_w)
    print("  CPU ratio vs nbformat: read %.1fx, write %.1fx, total %.1fx"
          % (nc_r / max(1, oc_r), nc_w / max(1, oc_w), ratio_cpu))
    print("  output byte-identical to the input file: ours %s, nbformat %s"
          % (ours["identical"], ref["identical"]))
    record({"bench": "notebook_io", "cells": ncells, "bytes": size,
            "ours": {"read_ms": ms(o_r), "write_ms": ms(o_w), "identical": ours["identical"],
                     "read_cpu_ms": ms(oc_r), "write_cpu_ms": ms(oc_w)},
            "nbformat": {"read_ms": ms(n_r), "write_ms": ms(n_w),
                         "read_cpu_ms": ms(nc_r), "write_cpu_ms": ms(nc_w)},
            "nbformat_novalidate": {"read_ms": ms(r_r), "write_ms": ms(r_w)},
            "ratio": ratio, "ratio_novalidate": ratio_raw, "ratio_cpu": ratio_cpu})
    return 0


# --- run ----------------------------------------------------------------------

RUN_CELLS = [
    "import pandas as pd\nimport numpy as np",
    "df = pd.DataFrame({'region': list('abcd') * 25, 'plan': np.arange(100.0),"
    " 'actual': np.arange(100.0) * 1.1})",
    "df.head()",
    "df['variance'] = df.actual - df.plan\ndf.describe()",
    "df.groupby('region').sum()",
    "import matplotlib.pyplot as plt",
    "plt.plot(df.plan, df.actual)\nplt.show()",
    "for i in range(3):\n    print('step', i)",
    "from IPython.display import display, Markdown\ndisplay(Markdown('**done**'))",
    "sum(range(10**5))",
]


def make_run_notebook(path, ncells=30):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    cells = []
    for i in range(ncells):
        src = RUN_CELLS[i] if i < len(RUN_CELLS) else "x_%d = %d * 2\nprint(x_%d)" % (i, i, i)
        cells.append(new_code_cell(src))
        if i % 10 == 9:
            cells.append(new_markdown_cell("Section %d" % (i // 10)))
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, path)


def timed(argv, env=None):
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    return time.monotonic() - t0, p


def cmd_run():
    rounds = benchlib.env_int("RUN_ROUNDS", 2 if QUICK else 5)
    tmp = tempfile.mkdtemp(prefix="ja-nbrun-")
    src = os.path.join(tmp, "report.ipynb")
    make_run_notebook(src)
    agent = os.path.join(BUILD, "jupyter-agent")
    clients = [
        ("jupyter-agent run (sandboxed)", [agent, "run", "-q", src, "-o", os.path.join(tmp, "a.ipynb")]),
        ("jupyter-agent run --no-sandbox", [agent, "run", "-q", "--no-sandbox", src,
                                             "-o", os.path.join(tmp, "b.ipynb")]),
        ("nbclient (NotebookClient.execute)", [PY, os.path.join(HERE, "notebook_nbclient.py"),
                                               src, os.path.join(tmp, "c.ipynb")]),
    ]
    print("\n== notebook_run: a 30-cell notebook (pandas, a matplotlib figure) run end to end, "
          "fresh process and kernel each time, median of %d" % rounds)
    walls = {name: [] for name, _ in clients}
    errors = {}
    for r in range(rounds):
        order = clients if r % 2 == 0 else list(reversed(clients))
        for name, argv in order:
            wall, p = timed(argv)
            if p.returncode != 0:
                errors[name] = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
                continue
            walls[name].append(wall)
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    print("  %-44s %10s %10s" % ("", "median s", "min s"))
    med = {}
    for name, _ in clients:
        if name in errors or not walls[name]:
            print("  %-44s failed: %s" % (name, errors.get(name, "no runs")))
            continue
        med[name] = benchlib.median(walls[name])
        print("  %-44s %10.2f %10.2f" % (name, med[name], min(walls[name])))
    ref = med.get("nbclient (NotebookClient.execute)")
    out = {"bench": "notebook_run", "cells": 30, "rounds": rounds,
           "median_s": med, "errors": errors}
    if ref:
        for name in med:
            if name != "nbclient (NotebookClient.execute)":
                print("  ratio nbclient / %s: %.2fx" % (name, ref / med[name]))
        if "jupyter-agent run (sandboxed)" in med:
            out["ratio_sandboxed"] = ref / med["jupyter-agent run (sandboxed)"]
        if "jupyter-agent run --no-sandbox" in med:
            out["ratio_plain"] = ref / med["jupyter-agent run --no-sandbox"]
    record(out)
    return 1 if errors else 0


def main():
    cmds = {"io": cmd_io, "run": cmd_run}
    if len(sys.argv) != 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
