"""Namespaces vs gVisor engine (issue 30), side by side in one run.

    BUILD=build python3 bench/gvisor.py

Rows, each for --engine namespaces and --engine gvisor, ratio = gvisor /
namespaces (lower is better for gVisor; 1.0 = the same):
  cold      wall time of `exec -c 1+1` (kernel start + first result), p50
  pool      wall time of `exec --warm pool -c 1+1` against `serve --pool 1
            --no-factory` of the same engine (the factory cannot run under
            gVisor, so both rows use fresh interpreters), p50
  groupby   a pandas groupby-sum on 1M rows, timed inside the kernel
  files     create and read back 10 000 small files in /mnt/data, inside
  output    a cell printing 20 000 lines: exec --json's duration_ms (until
            every output reached us, through the relay under gVisor)
Needs root (runsc). STARTUP_RUNS (default 3; QUICK=1: 1). Never asserts.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
BIN = os.path.join(BUILD, "jupyter-agent")
QUICK = os.environ.get("QUICK", "") not in ("", "0")
RUNS = 1 if QUICK else int(os.environ.get("STARTUP_RUNS", "3"))
ENGINES = ("namespaces", "gvisor")

COMPUTE = r"""
import json, os, time
import numpy as np, pandas as pd
df = pd.DataFrame({"k": np.arange(1_000_000) % 1000, "v": np.ones(1_000_000)})
t = time.perf_counter(); df.groupby("k")["v"].sum(); g = time.perf_counter() - t
os.makedirs("/mnt/data/many", exist_ok=True)
t = time.perf_counter()
for i in range(10000):
    with open("/mnt/data/many/%d" % i, "w") as f:
        f.write("x" * 100)
n = 0
for i in range(10000):
    with open("/mnt/data/many/%d" % i) as f:
        n += len(f.read())
fl = time.perf_counter() - t
print(json.dumps({"groupby_ms": g * 1000, "files_ms": fl * 1000}))
"""


def wall(argv, env=None):
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    return (time.perf_counter() - t) * 1000, p


def cold(engine):
    return [wall([BIN, "exec", "--warm", "cold", "--engine", engine, "-c", "1+1"])[0]
            for _ in range(RUNS)]


def pool(engine):
    d = tempfile.mkdtemp(prefix="ja-gvbench-")
    os.chmod(d, 0o700)
    env = dict(os.environ, JUPYTER_AGENT_SERVE_SOCKET=os.path.join(d, "s.sock"))
    srv = subprocess.Popen([BIN, "serve", "--engine", engine, "--pool", "1",
                            "--no-factory"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    out = []
    try:
        for _ in range(RUNS):
            deadline = time.time() + 120
            while time.time() < deadline:  # one warm kernel ready
                p = subprocess.run([BIN, "serve", "--status"], env=env,
                                   capture_output=True, text=True)
                try:
                    if json.loads(p.stdout).get("ready", 0) >= 1:
                        break
                except ValueError:
                    pass
                time.sleep(0.5)
            ms, p = wall([BIN, "exec", "--warm", "pool", "--engine", engine,
                          "-c", "1+1"], env=env)
            out.append(ms if p.returncode == 0 else float("nan"))
    finally:
        subprocess.run([BIN, "serve", "--stop"], env=env, capture_output=True)
        try:
            srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
    return out


def compute(engine):
    _, p = wall([BIN, "exec", "--engine", engine, "--timeout", "300",
                 "--memory", "2G", "-c", COMPUTE])
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}


def output(engine):
    _, p = wall([BIN, "exec", "--json", "--engine", engine, "--timeout", "300",
                 "-c", "for i in range(20000):\n    print(i)"])
    try:
        return json.loads(p.stdout)["duration_ms"]
    except (ValueError, KeyError):
        return float("nan")


def main():
    if os.geteuid() != 0:
        print("gvisor: skipped (runsc needs root)")
        return 0
    rows = {}
    for e in ENGINES:
        c = compute(e)
        rows.setdefault("cold start to 1+1 (ms, p50)", {})[e] = statistics.median(cold(e))
        rows.setdefault("first result through the pool (ms, p50)", {})[e] = statistics.median(pool(e))
        rows.setdefault("pandas groupby 1M rows (ms, in kernel)", {})[e] = c.get("groupby_ms", float("nan"))
        rows.setdefault("10 000 small files write+read (ms, in kernel)", {})[e] = c.get("files_ms", float("nan"))
        rows.setdefault("20 000-output cell (ms, exec --json)", {})[e] = output(e)
    print("\n## gVisor engine vs namespaces (ratio = gvisor / namespaces)\n")
    print("| measure | namespaces | gvisor | ratio |")
    print("|---|---:|---:|---:|")
    results = []
    for name, v in rows.items():
        ns, gv = v["namespaces"], v["gvisor"]
        ratio = gv / ns if ns and ns == ns and gv == gv else float("nan")
        print("| %s | %.0f | %.0f | %.2fx |" % (name, ns, gv, ratio))
        results.append({"bench": "gvisor", "measure": name, "namespaces": ns,
                        "gvisor": gv, "ratio": ratio})
    # Pause with memory (issue 31): bench/gvisor_pause.c, sizes GVPAUSE_MIB.
    exe = os.path.join(BUILD, "bench", "gvisor_pause")
    if os.access(exe, os.X_OK):
        env = dict(os.environ)
        if QUICK:
            env.setdefault("GVPAUSE_MIB", "100")
        p = subprocess.run([exe], capture_output=True, text=True, env=env)
        try:
            pr = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pr = {"rows": []}
        print("\n## gVisor pause with memory vs E2B's anchors (4 s/GiB, 1 s)\n")
        print("| kernel memory | pause (ms) | vs E2B | resume to first result (ms) | vs E2B | image (MiB, compressed) |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in pr.get("rows", []):
            if "error" in r:
                print("| %d MiB | error: %s |" % (r["mib"], r["error"][:120]))
                continue
            print("| %d MiB | %d | %.2fx | %d | %.2fx | %.0f |" % (
                r["mib"], r["pause_ms"], r["pause_vs_e2b"], r["resume_ms"],
                r["resume_vs_e2b"], r["image_mib"]))
            results.append(dict(r, bench="gvisor_pause"))
    if os.environ.get("BENCH_RESULTS"):
        with open(os.environ["BENCH_RESULTS"], "a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
