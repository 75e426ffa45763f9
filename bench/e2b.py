"""`jupyter-agent e2b`: what E2B SDK programs get, side by side with MCP.

    python3 bench/e2b.py            (BUILD, QUICK=1 as for bench/run)

Measures, with the official JS SDK (tests/e2b's pinned install) against a
server with a warm pool of its own (--pool 4):
  - create + first result: Sandbox.create() then runCode('1+1') answered,
    p50/p99 over 50 (a pause between them lets the pool refill, as an idle
    service's would);
  - runCode('pass') round trip on one sandbox, p50/p99;
  - a whole life: create -> runCode('1+1') -> kill() answered, p50/p99;
and the same `pass` as an MCP tools/call python over stdio on a sandboxed
kernel of the same kind, and the same whole life through the other doors,
with a `jupyter-agent serve --pool 4` running (what they take warm
kernels from): an MCP --http session (initialize -> tools/call python
1+1 -> DELETE), and `exec --json -c 1+1` (a process per session).
Prints ratios; never fails on a slow number.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import median, percentile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
BIN = os.path.join(BUILD, "jupyter-agent")
QUICK = bool(os.environ.get("QUICK"))
N_CREATE = 10 if QUICK else 50
N_PASS = 50 if QUICK else 300
TMP = tempfile.mkdtemp(prefix="ja-bench-e2b-")
os.chmod(TMP, 0o755)
ENV = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(TMP, "run"),
           HOME=os.path.join(TMP, "home"), PYDEVD_DISABLE_FILE_VALIDATION="1")
os.makedirs(ENV["XDG_RUNTIME_DIR"])
os.makedirs(ENV["HOME"])


def stats(name, ms):
    return {"name": name, "n": len(ms), "p50_ms": median(ms),
            "p99_ms": percentile(ms, 99)}


def npm_ready():
    d = os.path.join(ROOT, "tests", "e2b")
    if os.path.isdir(os.path.join(d, "node_modules", "@e2b")):
        return True
    if not shutil.which("npm"):
        return False
    return subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit",
                           "--no-fund"], cwd=d).returncode == 0


def start_listening(argv, pattern):
    """Start `argv`; return it and the first group of `pattern` (bytes)
    once its stderr prints it."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=ENV)
    while True:
        line = p.stderr.readline()
        if not line:
            raise RuntimeError("%s did not start" % " ".join(argv[1:3]))
        m = re.search(pattern, line)
        if m:
            threading.Thread(target=p.stderr.read, daemon=True).start()
            return p, m.group(1).decode()


def bench_sdk():
    p, url = start_listening([BIN, "e2b", "--listen", "127.0.0.1:0",
                              "--pool", "4", "--max-sandboxes", "8"],
                             rb"listening on (http://[0-9.:]+)")
    env = dict(ENV, E2B_API_URL=url, E2B_SANDBOX_URL=url,
               E2B_API_KEY="e2b_" + "ab" * 20, N_CREATE=str(N_CREATE),
               N_PASS=str(N_PASS))
    try:
        out = subprocess.run(["node", os.path.join(ROOT, "bench",
                                                   "e2b_sdk.cjs")],
                             env=env, capture_output=True, text=True,
                             timeout=1800)
    finally:
        p.terminate()
        p.wait(timeout=60)
    if out.returncode != 0:
        raise RuntimeError("bench/e2b_sdk.cjs: " + out.stderr[-2000:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return (stats("e2b: Sandbox.create() + runCode('1+1')", r["create"]),
            stats("e2b: runCode('pass')", r["pass"]),
            stats("e2b: create + runCode('1+1') + kill", r["cycle"]))


def start_serve():
    """A `serve --pool 4` on ENV's socket; returns it once it answers."""
    p = subprocess.Popen([BIN, "serve", "--pool", "4"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=ENV)
    for _ in range(600):
        st = subprocess.run([BIN, "serve", "--status"], env=ENV,
                            capture_output=True, text=True)
        if st.returncode == 0 and re.search(r"ready\D*[1-9]", st.stdout):
            return p
        time.sleep(0.2)
    return p


def mcp_cycle(port):
    """One MCP --http session's whole life: ms."""
    import http.client
    t0 = time.perf_counter_ns()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    h = {"Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}}}
    c.request("POST", "/mcp", body=json.dumps(init), headers=h)
    r = c.getresponse()
    r.read()
    h["MCP-Session-Id"] = r.getheader("MCP-Session-Id")
    h["MCP-Protocol-Version"] = "2025-11-25"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "python", "arguments": {"code": "1+1"}}}
    c.request("POST", "/mcp", body=json.dumps(call), headers=h)
    r = c.getresponse()
    body = r.read().decode()
    assert '"2"' in body or "2" in body, body
    c.request("DELETE", "/mcp", headers=h)
    c.getresponse().read()
    c.close()
    return (time.perf_counter_ns() - t0) / 1e6


def bench_other_doors():
    serve = start_serve()
    rows = []
    try:
        p, port = start_listening([BIN, "mcp", "--http", "127.0.0.1:0"],
                                  rb"127\.0\.0\.1:(\d+)/mcp")
        port = int(port)
        try:
            for _ in range(3):
                mcp_cycle(port)
                time.sleep(1.5)
            ms = []
            for _ in range(N_CREATE):
                ms.append(mcp_cycle(port))
                time.sleep(1.5)  # the pool refills, as for the SDK rows
            rows.append(stats("mcp --http: initialize + python 1+1 + "
                              "DELETE", ms))
        finally:
            p.terminate()
            p.wait(timeout=60)
        ms = []
        for _ in range(min(N_CREATE, 20)):
            t0 = time.perf_counter_ns()
            subprocess.run([BIN, "exec", "--json", "-c", "1+1"], env=ENV,
                           capture_output=True, timeout=300, check=True)
            ms.append((time.perf_counter_ns() - t0) / 1e6)
            time.sleep(1.5)
        rows.append(stats("exec --json -c 1+1 through serve", ms))
    finally:
        subprocess.run([BIN, "serve", "--stop"], env=ENV,
                       capture_output=True)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()
    return rows


def bench_mcp_pass():
    p = subprocess.Popen([BIN, "mcp"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=ENV, bufsize=0)

    def rpc(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        for line in p.stdout:  # skip notifications until the answer
            r = json.loads(line)
            if r.get("id") == msg["id"]:
                assert "result" in r, r
                return r
        raise RuntimeError("mcp closed stdout")

    rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"}}})
    samples = []
    for i in range(1, 30 + N_PASS + 1):
        t0 = time.perf_counter_ns()
        rpc({"jsonrpc": "2.0", "id": i, "method": "tools/call",
             "params": {"name": "python", "arguments": {"code": "pass"}}})
        if i > 30:
            samples.append((time.perf_counter_ns() - t0) / 1e6)
    p.stdin.close()
    p.wait(timeout=60)
    return stats("mcp stdio: python 'pass' (sandboxed)", samples)


def main():
    print("== e2b: the E2B JS SDK against `jupyter-agent e2b` (load %s)"
          % open("/proc/loadavg").read().split()[0])
    if not shutil.which("node") or not npm_ready():
        print("  skipped: node or the SDK install (tests/e2b) is missing")
        return 0
    create, pas, cycle = bench_sdk()
    mcp = bench_mcp_pass()
    doors = bench_other_doors()
    for r in (create, pas, mcp, cycle, *doors):
        print("  %-44s p50 %8.2f ms  p99 %8.2f ms" % (r["name"], r["p50_ms"],
                                                     r["p99_ms"]))
    print("  create to first result: p50 %.1f ms (target 50 ms; published "
          "create-to-first-command medians: Daytona 110 ms, E2B 440 ms)"
          % create["p50_ms"])
    print("  runCode('pass') over MCP's pass: x%.2f p50 (+%.2f ms)"
          % (pas["p50_ms"] / mcp["p50_ms"], pas["p50_ms"] - mcp["p50_ms"]))
    for d in doors:
        print("  a whole E2B sandbox life over %s: x%.2f p50"
              % (d["name"].split(":")[0], cycle["p50_ms"] / d["p50_ms"]))
    out = os.environ.get("BENCH_RESULTS")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"bench": "e2b",
                                "rows": [create, pas, mcp, cycle, *doors]})
                    + "\n")
    shutil.rmtree(TMP, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
