"""Driver for the warm-start benchmarks (issue 8): prints two tables.

    BUILD=build python3 bench/warm.py [startup] [density]

startup: time to first result (`1+1`) and to first chart (a DataFrame plot
as PNG) of a NEW session, p50 and p99, for jupyter_client (plain process),
our cold sandboxed start, the in-process pool, the factory, and the same
through `jupyter-agent serve` (what exec does when a server runs); ratio =
jupyter_client p50 / ours.
density: N idle sessions (numpy+pandas+matplotlib imported), PSS per
session (its box's processes, plus the factory's share), and `1+1` round
trips one session at a time and all at once.

Environment: STARTUP_RUNS (default 10), DENSITY_N ("10 50 100"),
DENSITY_FRESH_MAX (largest N for fresh interpreters, default 50: 100 of
them need ~11 GB), QUICK=1 (3 runs, N=10). Timings are never asserted.
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
PRELOAD = ("import io, numpy, pandas, matplotlib.pyplot, pandas.plotting._matplotlib\n"
           "from matplotlib.figure import Figure\n"
           "from matplotlib.backends.backend_agg import FigureCanvasAgg\n"
           "f = Figure(); FigureCanvasAgg(f); f.gca().plot([1, 2]); "
           "f.savefig(io.BytesIO(), format='png')")


def run(argv, timeout=3600):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def ms(us):
    return "%.0f" % (us / 1000.0) if us >= 10000 else "%.1f" % (us / 1000.0)


def startup():
    runs = 3 if QUICK else benchlib.env_int("STARTUP_RUNS", 10)
    rows = [("jupyter_client (plain process, no sandbox)",
             [sys.executable, os.path.join(HERE, "startup_warm_jc.py"), str(runs), "1"])]
    for mode, label in (("cold", "ours, cold sandbox"),
                        ("pool", "ours, pool (fresh interpreter per kernel)"),
                        ("factory", "ours, pool from the forking factory"),
                        ("serve", "exec path: serve pool"),
                        ("serve-factory", "exec path: serve --factory")):
        rows.append((label, [os.path.join(BUILD, "bench", "startup_warm"), "-m", mode,
                             "-r", str(runs), "-w", "1", "-P", PRELOAD]))
    results = []
    for label, argv in rows:
        res = run(argv)
        results.append((label, res))
        benchlib.emit({"bench": "startup_warm", "label": label, **res})
    ref = results[0][1]
    print("\n%-44s %9s %9s %9s %9s %7s %7s" % ("new session ->", "1+1 p50", "1+1 p99",
                                               "chart p50", "chart p99", "x 1+1", "x chart"))
    for label, res in results:
        if "error" in res:
            print("%-44s error: %s" % (label, res["error"]))
            continue
        r50 = benchlib.median(res["result_us"])
        c50 = benchlib.median(res["chart_us"])
        x = lambda a, b: "%.1f" % (a / b) if "error" not in ref else "-"
        print("%-44s %7s ms %7s ms %7s ms %7s ms %7s %7s" % (
            label, ms(r50), ms(benchlib.percentile(res["result_us"], 99)),
            ms(c50), ms(benchlib.percentile(res["chart_us"], 99)),
            x(benchlib.median(ref.get("result_us", [1])), r50),
            x(benchlib.median(ref.get("chart_us", [1])), c50)))
    print("(load average during the runs: %s)" % ", ".join(
        "%.1f" % r.get("loadavg", 0) for _, r in results if "error" not in r))


def density():
    ns = [10] if QUICK else [int(x) for x in os.environ.get("DENSITY_N", "10 50 100").split()]
    fresh_max = benchlib.env_int("DENSITY_FRESH_MAX", 50)
    print("\n%-8s %5s %10s %10s %10s %10s %10s %8s" % ("mode", "N", "PSS/sess", "factory",
                                                     "rtt p50", "rtt p99", "burst max", "warm-up"))
    for n in ns:
        for mode in ("factory", "fresh"):
            if mode == "fresh" and n > fresh_max:
                print("%-8s %5d  (skipped: DENSITY_FRESH_MAX=%d)" % (mode, n, fresh_max))
                continue
            res = run([os.path.join(BUILD, "bench", "density"), "-n", str(n), "-m", mode])
            benchlib.emit({"bench": "density", **res})
            if "error" in res:
                print("%-8s %5d error: %s" % (mode, n, res["error"]))
                continue
            print("%-8s %5d %7.1f MB %7.1f MB %7s ms %7s ms %7s ms %6.0f s" % (
                mode, n, res["per_session_total_kb"] / 1024.0, res["factory_kb"] / 1024.0,
                ms(benchlib.median(res["rtt_us"])), ms(benchlib.percentile(res["rtt_us"], 99)),
                ms(max(res["burst_us"])), res["warmup_ms"] / 1000.0))


def main():
    what = sys.argv[1:] or ["startup", "density"]
    if "startup" in what:
        startup()
    if "density" in what:
        density()
    return 0


if __name__ == "__main__":
    sys.exit(main())
