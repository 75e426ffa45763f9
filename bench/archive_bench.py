"""Report archives (`jupyter-agent archive`), measured side by side with
what they stand next to:

  pack     pack + verify of the finance demo session (wall, median)
  hashing  verify of an archive holding 1 GiB of inputs (QUICK: 128 MiB)
           against `sha256sum` over the same files: throughput ratio
           (target: verify at >= 80% of sha256sum's speed)
  rerun    `archive rerun` of the demo against `run` of the same notebook
           with the same inputs: the cost of verify + unpack

Prints its table and appends one JSON line to $BENCH_RESULTS.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", "build")
BIN = os.path.join(ROOT, BUILD, "jupyter-agent")
QUICK = os.environ.get("QUICK", "") not in ("", "0")
QUESTION = ("Here are our 2026 budget and the GL actuals for each quarter. "
            "Give me a variance report by department, account and quarter: "
            "flag the biggest variances, explain what caused them, and make "
            "charts.")


def record(obj):
    path = os.environ.get("BENCH_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(obj) + "\n")


def run(*args, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (args[:3], r.returncode,
                                                   r.stderr[-800:]))
    return r


def timed(*args, repeat=1):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(*args)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    tmp = tempfile.mkdtemp(prefix="ja-archive-bench.")
    try:
        return bench(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench(tmp):
    out = {"bench": "archive"}
    key = os.path.join(tmp, "k")
    run(BIN, "manifest", "keygen", "-o", key)
    data = os.path.join(ROOT, "examples", "data")
    files = []
    for name in sorted(os.listdir(data)):
        if name.endswith(".csv"):
            files += ["--file", os.path.join(data, name)]
    nb = os.path.join(tmp, "report.ipynb")
    run(BIN, "ask", *files, "--model", "replay:" + os.path.join(
        ROOT, "examples", "sessions", "quarterly-variance.jsonl"), "-o", nb,
        QUESTION, timeout=900)
    zipf = os.path.join(tmp, "report.zip")
    repeat = 3 if QUICK else 7
    out["pack_s"] = timed(BIN, "archive", "pack", nb, "-o", zipf, "--key",
                          key, "--no-probe", "--force", repeat=repeat)
    out["verify_s"] = timed(BIN, "archive", "verify", zipf, "--trust",
                            key + ".pub", repeat=repeat)
    print("== archive")
    print("  pack (no probe) of the demo session: %.3f s; verify: %.3f s"
          % (out["pack_s"], out["verify_s"]))

    # Hashing throughput: a notebook whose recorded inputs total SIZE.
    size = (128 if QUICK else 1024) << 20
    parts = 4
    inputs = []
    for i in range(parts):
        p = os.path.join(tmp, "big%d.bin" % i)
        with open(p, "wb") as f:
            left = size // parts
            while left:
                n = min(left, 8 << 20)
                f.write(os.urandom(n))
                left -= n
        inputs.append(p)
    big_nb = os.path.join(tmp, "big.ipynb")
    with open(nb) as f:
        doc = json.load(f)
    doc["metadata"]["jupyter_agent"]["inputs"] = []
    with open(big_nb, "w") as f:
        json.dump(doc, f)
    big_zip = os.path.join(tmp, "big.zip")
    args = [BIN, "archive", "pack", big_nb, "-o", big_zip, "--key", key,
            "--no-probe", "--force"]
    for p in inputs:
        args += ["--input", p]
    out["pack_big_s"] = timed(*args)
    reps = 1 if QUICK else 3
    out["verify_big_s"] = timed(BIN, "archive", "verify", big_zip, "--trust",
                                key + ".pub", repeat=reps)
    out["sha256sum_s"] = timed("sha256sum", *inputs, repeat=reps)
    mib = size / (1 << 20)
    out["verify_mib_s"] = mib / out["verify_big_s"]
    out["sha256sum_mib_s"] = mib / out["sha256sum_s"]
    out["hash_ratio"] = out["verify_mib_s"] / out["sha256sum_mib_s"]
    print("  verify of %d MiB of inputs: %.0f MiB/s; sha256sum: %.0f MiB/s; "
          "%.0f%% of sha256sum (target >= 80%%)"
          % (mib, out["verify_mib_s"], out["sha256sum_mib_s"],
             100 * out["hash_ratio"]))

    # rerun vs run: the same notebook, the same inputs, the same sandbox.
    out["rerun_s"] = timed(BIN, "archive", "rerun", zipf, "--trust",
                           key + ".pub")
    out["run_s"] = timed(BIN, "run", nb, "-o", os.path.join(tmp, "r.ipynb"),
                         "--allow-errors", *files)
    out["rerun_overhead_s"] = out["rerun_s"] - out["run_s"]
    print("  rerun of the demo: %.2f s; run of the same notebook: %.2f s; "
          "verify + unpack + lock check cost %+.2f s"
          % (out["rerun_s"], out["run_s"], out["rerun_overhead_s"]))
    record(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
