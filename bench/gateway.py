"""Kernels on a Jupyter Server (issue 15): a `pass` round trip and a
20 000-output cell through the server's kernel WebSocket, ours (`run
--gateway`) side by side with a Python client on the same server
(websocket-client speaking the same JSON protocol JupyterLab does), and
the cost per message over our local ZeroMQ path (`run`, sandboxed).

    BUILD=build python3 bench/gateway.py

Ours is measured as the difference between a notebook of N+1 cells and
one of 1 cell, so kernel start-up and shutdown cancel out; its p50/p99
come from the gaps between consecutive cells' shell.execute_reply times
(our clock, microseconds) in the written notebook, the Python client's
from timing each execution. Environment:
GATEWAY_BENCH_CELLS (default 200; QUICK=1: 40). Timings are never
asserted.
"""
import datetime
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

import nbformat
import websocket  # python3-websocket
from nbformat.v4 import new_code_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
BIN = os.path.abspath(os.path.join(BUILD, "jupyter-agent"))
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
QUICK = os.environ.get("QUICK", "") not in ("", "0")
N = benchlib.env_int("GATEWAY_BENCH_CELLS", 40 if QUICK else 200)
LOUD = "for i in range(20000):\n    print(i, flush=True)"
# After the reply, iopub silent this long means the idle was lost (the
# server's IOPub high-water mark drops messages of a fast cell, see
# bench/gateway_jc.py): stop waiting instead of hanging.
QUIET = 5.0


def start_server(tmp):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(os.environ, HOME=tmp, JUPYTER_RUNTIME_DIR=tmp + "/rt",
               JUPYTER_CONFIG_DIR=tmp + "/cfg", JUPYTER_DATA_DIR=tmp + "/data")
    args = [PYTHON, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1",
            "--port=%d" % port, "--ServerApp.port_retries=0",
            "--ServerApp.token=" + token, "--ServerApp.root_dir=" + tmp,
            "--ServerApp.iopub_data_rate_limit=1e12",
            "--ServerApp.iopub_msg_rate_limit=1e9"]
    if os.getuid() == 0:
        args.append("--allow-root")
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = "127.0.0.1:%d" % port
    for _ in range(300):
        try:
            api(url, token, "GET", "/api/kernelspecs")
            return proc, url, token
        except Exception:
            time.sleep(0.2)
    raise RuntimeError("jupyter_server did not start")


def server_cpu_ms(proc):
    """CPU time (user + system, ms) the jupyter-server process itself has
    used so far: its kernels are other processes and not counted."""
    st = open("/proc/%d/stat" % proc.pid).read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def api(url, token, method, path, body=None):
    req = urllib.request.Request("http://%s%s" % (url, path), method=method,
                                 data=body, headers={
                                     "Authorization": "token " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        data = r.read()
        return json.loads(data) if data else None


def python_client(url, token):
    """(pass round trip ms, 20 000-output cell ms) with websocket-client."""
    kid = api(url, token, "POST", "/api/kernels", b'{"name":"python3"}')["id"]
    sess = str(uuid.uuid4())
    ws = websocket.create_connection(
        "ws://%s/api/kernels/%s/channels?session_id=%s" % (url, kid, sess),
        header=["Authorization: token " + token])
    ws.settimeout(QUIET)

    def execute(code):
        mid = str(uuid.uuid4())
        ws.send(json.dumps({
            "header": {"msg_id": mid, "msg_type": "execute_request",
                       "session": sess, "username": "bench",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False,
                        "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True},
            "buffers": []}))
        reply = idle = False
        while not (reply and idle):
            try:
                m = json.loads(ws.recv())
            except websocket.WebSocketTimeoutException:
                if reply:
                    break
                raise
            if m["parent_header"].get("msg_id") != mid:
                continue
            reply |= m["msg_type"] == "execute_reply"
            idle |= (m["msg_type"] == "status" and
                     m["content"]["execution_state"] == "idle")
    execute("pass")
    t = time.monotonic()
    each = []
    for _ in range(N):
        t1 = time.monotonic()
        execute("pass")
        each.append((time.monotonic() - t1) * 1000)
    rt = (time.monotonic() - t) * 1000 / N
    t = time.monotonic()
    execute(LOUD)
    loud = (time.monotonic() - t) * 1000
    ws.close()
    api(url, token, "DELETE", "/api/kernels/" + kid)
    return rt, loud, each


def gaps_ms(path):
    """Ms between consecutive cells' shell.execute_reply in a notebook."""
    nb = nbformat.read(path, as_version=4)
    ends = [datetime.datetime.fromisoformat(
        c.metadata["execution"]["shell.execute_reply"].replace("Z", "+00:00"))
        for c in nb.cells]
    return [(b - a).total_seconds() * 1000 for a, b in zip(ends, ends[1:])]


def pct(samples):
    return (benchlib.percentile(samples, 50), benchlib.percentile(samples, 99))


def ours(tmp, cells, args):
    """Wall ms of `run` over a notebook of `cells` (b-out.ipynb kept)."""
    src = os.path.join(tmp, "b.ipynb")
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells]), src)
    t = time.monotonic()
    # A loaded machine takes minutes over the loud cell: no 60 s default.
    r = subprocess.run([BIN, "run", "--timeout", "900", *args, src, "-o",
                        os.path.join(tmp, "b-out.ipynb")],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-500:])
    return (time.monotonic() - t) * 1000


def main():
    tmp = tempfile.mkdtemp(prefix="ja-gw-bench-")
    proc, url, token = start_server(tmp)
    try:
        tok = os.path.join(tmp, "token")
        with open(tok, "w") as f:
            f.write(token)
        gw = ["--gateway", "http://" + url, "--gateway-token-file", tok]
        base = ours(tmp, ["pass"], gw)
        rt = (ours(tmp, ["pass"] * (N + 1), gw) - base) / N
        each = gaps_ms(os.path.join(tmp, "b-out.ipynb"))
        c0 = server_cpu_ms(proc)
        loud = ours(tmp, ["pass", LOUD], gw) - base
        srv_ours = server_cpu_ms(proc) - c0
        local_base = ours(tmp, ["pass"], [])
        local_rt = (ours(tmp, ["pass"] * (N + 1), []) - local_base) / N
        local_loud = ours(tmp, ["pass", LOUD], []) - local_base
        c0 = server_cpu_ms(proc)
        py_rt, py_loud, py_each = python_client(url, token)
        srv_py = server_cpu_ms(proc) - c0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    print("gateway: pass round trip   ours %.1f ms   python ws client %.1f ms"
          "   ratio %.2f   (local ZeroMQ: %.2f ms)" %
          (rt, py_rt, rt / py_rt, local_rt))
    print("gateway: pass round trip   ours p50 %.1f p99 %.1f ms   python ws "
          "client p50 %.1f p99 %.1f ms" % (pct(each) + pct(py_each)))
    print("gateway: 20000-output cell ours %.0f ms   python ws client %.0f ms"
          "   ratio %.2f   (local ZeroMQ: %.0f ms; per message through "
          "the server +%.1f us)" %
          (loud, py_loud, loud / py_loud, local_loud,
           (loud - local_loud) * 1000 / 20000))
    # What bounds the loud row: the server's own CPU for each message it
    # forwards (both clients' runs include a kernel start, a `pass` and a
    # delete; the Python client's also its N `pass` cells).
    print("gateway: jupyter-server CPU during the 20000-output cell: with ours "
          "%.0f ms (%.0f us per output), with the python ws client %.0f ms "
          "(%.0f us per output, %d `pass` cells included); load average %.1f" %
          (srv_ours, srv_ours * 1000 / 20000, srv_py, srv_py * 1000 / 20000,
           N, os.getloadavg()[0]))
    path = os.environ.get("BENCH_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"bench": "gateway",
                                "server_cpu_ours_ms": srv_ours,
                                "server_cpu_py_ms": srv_py, "pass_ms": rt,
                                "pass_py_ms": py_rt, "pass_local_ms": local_rt,
                                "pass_p50_ms": pct(each)[0],
                                "pass_p99_ms": pct(each)[1],
                                "pass_py_p50_ms": pct(py_each)[0],
                                "pass_py_p99_ms": pct(py_each)[1],
                                "loud_ms": loud, "loud_py_ms": py_loud,
                                "loud_local_ms": local_loud}) + "\n")


if __name__ == "__main__":
    main()
