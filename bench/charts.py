"""Chart data extraction cost (issue 28): per figure, the time the chart
formatter (agent/session/ag_outputs.py) takes, with the JSON encoding
ipykernel then does, against the time the inline backend's PNG formatter
takes to render the same figure, in a real sandboxed kernel started by
`jupyter-agent exec`. Target: extraction <= 5% of the render.

    BUILD=build python3 bench/charts.py

Figures: a bar chart (12 bars), a line of 10 000 points, a scatter of
100 000 points. CHARTS_RUNS (default 7; QUICK=1: 3) timings each, median
reported. Timings are never asserted.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
QUICK = os.environ.get("QUICK", "") not in ("", "0")
RUNS = benchlib.env_int("CHARTS_RUNS", 3 if QUICK else 7)

CELL = r"""
import json, time
import numpy as np, matplotlib.pyplot as plt
fmts = get_ipython().display_formatter.formatters
chart = fmts['application/vnd.jupyter-agent.chart+json']
png = fmts['image/png']
def med(f, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]
def bar():
    fig, ax = plt.subplots(); ax.bar(['c%d' % i for i in range(12)], range(12)); return fig
def line():
    fig, ax = plt.subplots(); ax.plot(np.sin(np.arange(10000) / 100)); return fig
def scatter():
    r = np.random.default_rng(1); fig, ax = plt.subplots()
    ax.scatter(r.normal(size=100000), r.normal(size=100000), s=1); return fig
out = {}
for name, make in (('bar', bar), ('line_10k', line), ('scatter_100k', scatter)):
    fig = make(); png(fig); chart(fig)
    r = med(lambda: png(fig), RUNS)
    e = med(lambda: json.dumps(chart(fig)), RUNS)
    out[name] = {'render_ms': r * 1e3, 'extract_ms': e * 1e3,
                 'ratio': e / r, 'chart_bytes': len(json.dumps(chart(fig)))}
    plt.close(fig)
print('RESULT ' + json.dumps(out))
"""


def main():
    code = "RUNS = %d\n" % RUNS + CELL
    p = subprocess.run([os.path.join(BUILD, "jupyter-agent"), "exec",
                        "--warm", "cold", "--timeout", "600", "--json",
                        "-c", code], capture_output=True, text=True,
                       timeout=900)
    res = {"bench": "charts", "runs": RUNS}
    try:
        outs = json.loads(p.stdout)["outputs"]
        text = "".join(o.get("text", "") for o in outs)
        line = [l for l in text.splitlines() if l.startswith("RESULT ")][0]
        res["figures"] = json.loads(line[7:])
    except Exception as e:  # measure, never fail the run silently
        res["error"] = "%s: %s %s" % (type(e).__name__, e, p.stderr[-300:])
        print("charts: " + res["error"], file=sys.stderr)
    benchlib.emit(res)
    path = os.environ.get("BENCH_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(res) + "\n")
    if "figures" in res:
        print("\n== chart data extraction vs PNG render, per figure "
              "(median of %d)" % RUNS)
        print("  %-14s %12s %12s %8s %12s  target <= 5%%" % (
            "figure", "render", "extract", "ratio", "chart JSON"))
        for name, r in res["figures"].items():
            print("  %-14s %9.1f ms %9.2f ms %7.1f%% %9d B  %s" % (
                name, r["render_ms"], r["extract_ms"], 100 * r["ratio"],
                r["chart_bytes"], "met" if r["ratio"] <= 0.05 else "NOT met"))
    return 0 if "figures" in res else 1


sys.exit(main())
