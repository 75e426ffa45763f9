"""`jupyter-agent mcp`: what one `python` tool call of `1+1` costs.

    python3 bench/mcp.py [N]        (BUILD, QUICK=1 as for bench/run)

Compares, on this machine, p50/p99 of:
  - kernel:     the bridge's own round trip for `1+1` (bench/roundtrip -c
                '1+1') on a plain ipykernel (jupyter_client's KernelManager,
                ipc): the floor under every MCP call;
  - mcp stdio:  tools/call python {code: "1+1"} over stdio, request line
                written to response line read, --no-sandbox (the same kind
                of kernel as the floor, so the difference is what MCP adds);
  - mcp stdio (sandboxed) and mcp http (sandboxed): the default setup;
  - exec --json: `jupyter-agent exec --json -c 1+1` per call (a fresh
                sandboxed kernel each time), what MCP clients did before.
Then HTTP concurrency (C sessions each running a pandas cell at once, all
must be answered) and the server's memory per idle MCP session. Prints
ratios; never fails on a slow number.
"""
import http.client
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import median, percentile  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
BIN = os.path.join(BUILD, "jupyter-agent")
QUICK = bool(os.environ.get("QUICK"))
N = int(sys.argv[1]) if len(sys.argv) > 1 else (50 if QUICK else 300)
WARM = 10 if QUICK else 30
CONC = int(os.environ.get("MCP_BENCH_SESSIONS", "4" if QUICK else "20"))
TMP = tempfile.mkdtemp(prefix="ja-bench-mcp-")
os.chmod(TMP, 0o755)
ENV = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(TMP, "run"),
           HOME=os.path.join(TMP, "home"), PYDEVD_DISABLE_FILE_VALIDATION="1")
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
os.makedirs(ENV["XDG_RUNTIME_DIR"])
os.makedirs(ENV["HOME"])
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}}


def call(i, code="1+1"):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "python", "arguments": {"code": code}}}


def read_response(stream, want_id):
    """The JSON-RPC response to request `want_id` from a line stream.

    Notifications (a `notifications/message` warning, progress) and
    responses to other ids may come first; they are skipped, never taken
    for the answer."""
    while True:
        line = stream.readline()
        if not line:
            raise RuntimeError("mcp: the server closed stdout before "
                               "answering request %r" % (want_id,))
        msg = json.loads(line)
        if msg.get("id") == want_id and ("result" in msg or "error" in msg):
            if "error" in msg:
                raise RuntimeError("mcp: request %r failed: %r"
                                   % (want_id, msg["error"]))
            return msg


def stats(name, us):
    return {"name": name, "n": len(us), "p50_ms": median(us) / 1000,
            "p99_ms": percentile(us, 99) / 1000}


def bench_kernel():
    from jupyter_client import KernelManager
    d = tempfile.mkdtemp(prefix="k-", dir=TMP)
    km = KernelManager(kernel_name="python3", transport="ipc",
                       connection_file=os.path.join(d, "kernel.json"))
    km.ip = os.path.join(d, "k")
    km.start_kernel()
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        kc.stop_channels()
        out = subprocess.run(
            [os.path.join(BUILD, "bench", "roundtrip"), "-f",
             km.connection_file, "-n", str(N), "-w", str(WARM), "-c", "1+1"],
            capture_output=True, text=True, timeout=600, env=ENV)
        r = json.loads(out.stdout)
        return stats("kernel round trip (bridge, plain kernel)",
                     r["samples_us"])
    finally:
        km.shutdown_kernel(now=True)


def bench_stdio(sandboxed):
    args = [BIN, "mcp"] + ([] if sandboxed else ["--no-sandbox"])
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=ENV, bufsize=0)

    def rpc(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        return read_response(p.stdout, msg["id"])

    rpc(INIT)
    samples = []
    for i in range(1, WARM + N + 1):
        t0 = time.perf_counter_ns()
        r = rpc(call(i))
        t1 = time.perf_counter_ns()
        assert r["result"]["structuredContent"]["outputs"][0]["data"][
            "text/plain"] == "2", r
        if i > WARM:
            samples.append((t1 - t0) // 1000)
    p.stdin.close()
    p.wait(timeout=60)
    return stats("mcp stdio%s" % (" (sandboxed)" if sandboxed else
                                  " (--no-sandbox)"), samples)


def start_http(*extra):
    p = subprocess.Popen([BIN, "mcp", "--http", "127.0.0.1:0", *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=ENV)
    while True:
        line = p.stderr.readline()
        m = re.search(rb"127\.0\.0\.1:(\d+)/mcp", line)
        if m:
            threading.Thread(target=p.stderr.read, daemon=True).start()
            return p, int(m.group(1))
        if not line:
            raise RuntimeError("mcp --http did not start")


def http_session(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    h = {"Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}

    def post(msg):
        c.request("POST", "/mcp", body=json.dumps(msg), headers=h)
        r = c.getresponse()
        body = r.read()
        if r.getheader("MCP-Session-Id"):
            h["MCP-Session-Id"] = r.getheader("MCP-Session-Id")
            h["MCP-Protocol-Version"] = "2025-11-25"
        if not body:
            return None
        if "text/event-stream" in (r.getheader("Content-Type") or ""):
            # A streamed answer: notifications may precede the response.
            datas = [ln[5:].strip() for ln in body.decode().splitlines()
                     if ln.startswith("data:")]
            return read_response(io.StringIO("\n".join(datas) + "\n"),
                                 msg["id"])
        return json.loads(body)

    post(INIT)
    return post


def bench_http():
    p, port = start_http()
    try:
        post = http_session(port)
        samples = []
        for i in range(1, WARM + N + 1):
            t0 = time.perf_counter_ns()
            r = post(call(i))
            t1 = time.perf_counter_ns()
            assert "2" in json.dumps(r["result"]["structuredContent"]), r
            if i > WARM:
                samples.append((t1 - t0) // 1000)
        return stats("mcp http (sandboxed, keep-alive)", samples)
    finally:
        p.terminate()
        p.wait(timeout=60)


def bench_exec():
    n = 3 if QUICK else 8
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        subprocess.run([BIN, "exec", "--json", "-c", "1+1"], env=ENV,
                       capture_output=True, timeout=300, check=True)
        samples.append((time.perf_counter_ns() - t0) // 1000)
    return stats("exec --json per call (fresh sandboxed kernel)", samples)


def bench_concurrency():
    p, port = start_http("--max-sessions", str(CONC + 1))
    try:
        results = [None] * CONC
        code = ("import pandas as pd\n"
                "df = pd.DataFrame({'a': range(1000), 'b': range(1000)})\n"
                "int(df.a.sum() + df.b.mean())")

        def one(i):
            try:
                post = http_session(port)
                r = post(call(1, code))
                results[i] = "499999" in json.dumps(r)
            except Exception as e:  # noqa: BLE001
                results[i] = repr(e)
        t0 = time.perf_counter()
        ts = [threading.Thread(target=one, args=(i,)) for i in range(CONC)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.perf_counter() - t0
        return {"name": "http: %d sessions, a pandas cell each" % CONC,
                "answered": sum(r is True for r in results),
                "wall_s": wall}
    finally:
        p.terminate()
        p.wait(timeout=120)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bench_idle_memory():
    k = 50
    p, port = start_http("--max-sessions", str(k + 1))
    try:
        time.sleep(0.5)
        before = rss_kib(p.pid)
        posts = [http_session(port) for _ in range(k)]
        time.sleep(0.5)
        after = rss_kib(p.pid)
        return {"name": "server memory per idle MCP session (no kernel "
                "started yet)", "kib_per_session": (after - before) / k,
                "sessions": len(posts)}
    finally:
        p.terminate()
        p.wait(timeout=60)


def main():
    print("== mcp: a python tool call of `1+1` (N=%d, load %s)"
          % (N, open("/proc/loadavg").read().split()[0]))
    rows = [bench_kernel(), bench_stdio(False), bench_stdio(True),
            bench_http(), bench_exec()]
    floor = rows[0]
    for r in rows:
        print("  %-48s p50 %8.2f ms  p99 %8.2f ms  (x%.2f p50 of the "
              "kernel round trip)" % (r["name"], r["p50_ms"], r["p99_ms"],
                                      r["p50_ms"] / floor["p50_ms"]))
    print("  MCP stdio adds %.2f ms at p50 over the kernel round trip "
          "(same kind of kernel, --no-sandbox)"
          % (rows[1]["p50_ms"] - floor["p50_ms"]))
    print("  exec --json per call is x%.0f the MCP stdio call (sandboxed)"
          % (rows[4]["p50_ms"] / rows[2]["p50_ms"]))
    c = bench_concurrency()
    print("  %s: %d/%d answered in %.1f s" % (c["name"], c["answered"],
                                             CONC, c["wall_s"]))
    m = bench_idle_memory()
    print("  %s: %.0f KiB" % (m["name"], m["kib_per_session"]))
    out = os.environ.get("BENCH_RESULTS")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"bench": "mcp", "rows": rows,
                                "concurrency": c, "idle": m}) + "\n")
    subprocess.run(["rm", "-rf", TMP])
    return 0 if c["answered"] == CONC else 1


if __name__ == "__main__":
    sys.exit(main())
