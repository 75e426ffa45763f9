"""gateway (Python reference): kernels through a Jupyter Server, measured
with the Python clients that speak its REST + WebSocket API.

    /usr/bin/python3 bench/gateway_jc.py

Starts Debian's jupyter-server (python3-jupyter-server) on 127.0.0.1 with a
random port and token, private HOME and runtime dir, and the IOPub rate
limits off (its defaults, 1000 messages/s and 1 MB/s, would drop most of a
20 000-output cell, for every client alike). Then, for each client:

  - `pass` round trip: execute_request sent to execute_reply AND iopub
    status idle received, p50 / p99 over GATEWAY_RUNS (default 200; QUICK=1:
    30) after 5 warm-up runs;
  - a 20 000-output cell, `display({'text/plain': str(i)}, raw=True)` in a
    loop (the cell bench/clientcpu.c uses: one display_data message per
    output, so the count is exact; print(flush=True) lets ipykernel merge
    lines), GATEWAY_OUTPUTS to change it: wall time to idle, the client's
    CPU (getrusage, all its threads) and the server's (from /proc), each
    output kept as an nbformat-shaped dict.

Clients:
  - jupyter_server's GatewayKernelManager / GatewayKernelClient, the code a
    Jupyter Server uses with --gateway-url (legacy JSON framing over
    websocket-client, a reader thread, queues polled with asyncio.sleep(0));
  - a minimal tornado WebSocket client speaking the
    v1.kernel.websocket.jupyter.org binary framing, the leanest Python way.

bench/gateway.py measures ours (`run --gateway`) on such a server; this
file is the reference with jupyter_server's own client (`BENCHES=gateway_jc
sh bench/run`).

Lost outputs: the server's IOPub SUB socket and the kernel's PUB keep
libzmq's default high-water mark (1000), so when the server falls behind
a fast cell the kernel drops messages before any client sees them (on this
2-core machine at load 10, 30-50 % of the 20 000). The table's "kept"
column counts what arrived; CPU per output is per output received.

Note on the round trip: jupyter-server 1.23 never sets TCP_NODELAY on its
kernel WebSockets, so a reply written right after a small status message
waits for the client's delayed ACK (up to 40 ms on Linux). Measured here
with the tornado client: `pass` p50 48 ms stock, 13 ms with the server
patched to set_nodelay(True). Every client through this server pays it
unless it acknowledges at once (TCP_QUICKACK after each read).
"""
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

QUICK = os.environ.get("QUICK", "") not in ("", "0")
PYTHON = "/usr/bin/python3"
V1 = "v1.kernel.websocket.jupyter.org"
# After the reply, iopub silent this long means the idle was lost (dropped
# at the server's IOPub high-water mark, see above): stop waiting.
QUIET = 5.0


def outputs_cell(n):
    return ("from IPython.display import display\n"
            "for i in range(%d): display({'text/plain': str(i)}, raw=True)" % n)


def runs():
    return 30 if QUICK else benchlib.env_int("GATEWAY_RUNS", 200)


def n_outputs():
    return 2000 if QUICK else benchlib.env_int("GATEWAY_OUTPUTS", 20000)


class Server:
    """A jupyter-server on 127.0.0.1, private dirs, random port and token."""

    def __init__(self, legacy=False):
        self.tmp = tempfile.mkdtemp(prefix="ja-bench-gw-")
        self.token = uuid.uuid4().hex
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        home = os.path.join(self.tmp, "home")
        os.mkdir(home)
        env = dict(os.environ, HOME=home,
                   JUPYTER_RUNTIME_DIR=os.path.join(self.tmp, "runtime"),
                   JUPYTER_CONFIG_DIR=os.path.join(self.tmp, "config"),
                   JUPYTER_DATA_DIR=os.path.join(self.tmp, "data"),
                   IPYTHONDIR=os.path.join(self.tmp, "ipython"),
                   PYDEVD_DISABLE_FILE_VALIDATION="1")
        argv = [PYTHON, "-m", "jupyter_server", "--ServerApp.token=" + self.token,
                "--ip=127.0.0.1", "--port=%d" % self.port, "--no-browser",
                "--ServerApp.port_retries=0", "--ServerApp.root_dir=" + self.tmp,
                "--ServerApp.iopub_msg_rate_limit=0",
                "--ServerApp.iopub_data_rate_limit=0"]
        if legacy:
            argv.append("--ServerApp.kernel_ws_protocol=")
        if os.geteuid() == 0:  # the server refuses root without it
            argv.append("--allow-root")
        self.log = open(os.path.join(self.tmp, "server.log"), "wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d" % self.port
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                self.request("GET", "/api")
                return
            except OSError:
                time.sleep(0.2)
        with open(self.log.name, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace")
        self.stop()
        raise RuntimeError("jupyter-server did not come up within 120 s:\n" + tail)

    def request(self, method, path, body=None):
        req = urllib.request.Request(
            self.url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": "token " + self.token})
        with urllib.request.urlopen(req, timeout=60) as r:
            data = r.read()
            return json.loads(data) if data else None

    def cpu_us(self):
        """The server's CPU so far (user + system, its threads), in µs."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) * 1000000 // ticks

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        subprocess.run(["rm", "-rf", self.tmp])


def keep(outputs, m):
    if m["msg_type"] == "display_data":
        c = m["content"]
        outputs.append({"output_type": "display_data", "data": c["data"],
                        "metadata": c["metadata"]})


def measure(server, execute):
    """Drive `execute(code, on_iopub)` (returns True when reply and idle are
    in, False when the idle was lost and QUIET seconds passed) through the
    round trips and the output cell; return the figures."""
    for _ in range(5):
        execute("pass", None)
    rt = []
    for _ in range(runs()):
        t0 = time.perf_counter()
        execute("pass", None)
        rt.append((time.perf_counter() - t0) * 1000.0)
    n = n_outputs()
    outputs = []
    u0, s0 = benchlib.cpu_us()
    srv0 = server.cpu_us()
    t0 = time.perf_counter()
    saw_idle = execute(outputs_cell(n), lambda m: keep(outputs, m))
    wall = time.perf_counter() - t0
    if not saw_idle:  # don't bill the wait for an idle that never came
        wall -= QUIET
    u1, s1 = benchlib.cpu_us()
    srv1 = server.cpu_us()
    return {"pass_p50_ms": benchlib.median(rt),
            "pass_p99_ms": benchlib.percentile(rt, 99), "runs": len(rt),
            "outputs": n, "outputs_kept": len(outputs), "idle_lost": not saw_idle,
            "cell_wall_ms": wall * 1000.0,
            "client_cpu_ms": ((u1 - u0) + (s1 - s0)) / 1000.0,
            "server_cpu_ms": (srv1 - srv0) / 1000.0}


# ------------------------------------------- jupyter_server's gateway client


def run_gateway_client(server):
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.gateway.managers import GatewayKernelManager

    gc = GatewayClient.instance()
    gc.url = server.url
    gc.auth_token = server.token
    gc.init_static_args()
    # jupyter_server 1.23's GatewayKernelClient opens its WebSocket without
    # the Authorization header its REST calls carry (the server answers
    # 403); add it, the one change made to that client here.
    import jupyter_server.gateway.managers as managers

    real = managers.websocket.create_connection

    def with_token(url, **kw):
        kw.setdefault("header", ["Authorization: token " + server.token])
        return real(url, **kw)
    managers.websocket.create_connection = with_token

    async def go():
        km = GatewayKernelManager()
        await km.start_kernel(kernel_name="python3")
        kc = km.client()
        await kc.start_channels()
        await kc.wait_for_ready(timeout=60)

        async def execute_async(code, on_iopub):
            msg_id = kc.execute(code)
            replied = idle = False
            last = time.monotonic()
            while not (replied and idle):
                if not replied:
                    try:
                        m = await kc.get_shell_msg(timeout=0.001)
                        replied = m["parent_header"].get("msg_id") == msg_id
                    except Exception:  # queue.Empty, polled as the client does
                        pass
                try:
                    m = await kc.get_iopub_msg(timeout=0.001)
                except Exception:
                    if replied and time.monotonic() - last > QUIET:
                        return False
                    continue
                last = time.monotonic()
                if m["parent_header"].get("msg_id") != msg_id:
                    continue
                if on_iopub:
                    on_iopub(m)
                if m["msg_type"] == "status" and \
                        m["content"]["execution_state"] == "idle":
                    idle = True
            return True

        loop = asyncio.get_running_loop()
        figures = await loop.run_in_executor(
            None, measure, server,
            lambda code, cb: asyncio.run_coroutine_threadsafe(
                execute_async(code, cb), loop).result(timeout=600))
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        return figures

    return asyncio.run(go())


# ------------------------------------------------- a lean tornado v1 client


def run_tornado_v1(server):
    import tornado.httpclient
    import tornado.websocket

    kid = server.request("POST", "/api/kernels", {"name": "python3"})["id"]
    session = uuid.uuid4().hex

    def frame(msg_type, content, channel="shell"):
        header = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type,
                  "username": "bench", "session": session,
                  "date": "2026-01-01T00:00:00Z", "version": "5.3"}
        parts = [json.dumps(p).encode() for p in (header, {}, {}, content)]
        ch = channel.encode()
        offs = [8 * (1 + 1 + len(parts) + 1)]
        offs.append(offs[-1] + len(ch))
        for p in parts:
            offs.append(offs[-1] + len(p))
        return header["msg_id"], (len(offs).to_bytes(8, "little") + b"".join(
            o.to_bytes(8, "little") for o in offs) + ch + b"".join(parts))

    def parse(f):
        n = int.from_bytes(f[:8], "little")
        o = [int.from_bytes(f[8 * (i + 1):8 * (i + 2)], "little")
             for i in range(n)]
        m = {"channel": f[o[0]:o[1]].decode()}
        for i, k in enumerate(("header", "parent_header", "metadata",
                               "content")):
            m[k] = json.loads(f[o[i + 1]:o[i + 2]])
        m["msg_type"] = m["header"]["msg_type"]
        return m

    async def go():
        req = tornado.httpclient.HTTPRequest(
            "ws://127.0.0.1:%d/api/kernels/%s/channels" % (server.port, kid),
            headers={"Authorization": "token " + server.token})
        ws = await tornado.websocket.websocket_connect(
            req, subprotocols=[V1], max_message_size=256 * 1024 * 1024)
        assert ws.selected_subprotocol == V1, "the server did not offer v1"

        async def execute_async(code, on_iopub, msg_type="execute_request"):
            content = {"code": code, "silent": False, "store_history": True,
                       "user_expressions": {}, "allow_stdin": False,
                       "stop_on_error": True} if code is not None else {}
            msg_id, data = frame(msg_type, content)
            await ws.write_message(data, binary=True)
            replied = idle = False
            while not (replied and idle):
                try:
                    f = await asyncio.wait_for(ws.read_message(),
                                               QUIET if replied else None)
                except asyncio.TimeoutError:
                    return False
                m = parse(f)
                if m["parent_header"].get("msg_id") != msg_id:
                    continue
                if m["channel"] == "shell":
                    replied = True
                elif m["channel"] == "iopub":
                    if on_iopub:
                        on_iopub(m)
                    if m["msg_type"] == "status" and \
                            m["content"]["execution_state"] == "idle":
                        idle = True
            return True

        await asyncio.wait_for(execute_async(None, None, "kernel_info_request"), 60)
        loop = asyncio.get_running_loop()
        figures = await loop.run_in_executor(
            None, measure, server,
            lambda code, cb: asyncio.run_coroutine_threadsafe(
                execute_async(code, cb), loop).result(timeout=600))
        ws.close()
        return figures

    try:
        return asyncio.run(go())
    finally:
        server.request("DELETE", "/api/kernels/" + kid)


CLIENTS = [
    ("jupyter_server GatewayKernelClient (legacy JSON)", run_gateway_client),
    ("tornado WebSocket client (v1 binary)", run_tornado_v1),
]


def print_rows(rows):
    print("%-50s %8s %8s %9s %9s %9s %7s" % (
        "", "pass p50", "pass p99", "cell wall", "clientCPU", "serverCPU",
        "kept"))
    for name, f in rows:
        if f is None:
            print("%-50s failed" % name)
            continue
        print("%-50s %6.2fms %6.2fms %7.0fms %7.0fms %7.0fms %7d%s" % (
            name, f["pass_p50_ms"], f["pass_p99_ms"], f["cell_wall_ms"],
            f["client_cpu_ms"], f["server_cpu_ms"], f["outputs_kept"],
            " (idle lost)" if f["idle_lost"] else ""))


def main():
    server = Server()
    rows = []
    try:
        for name, fn in CLIENTS:
            try:
                rows.append((name, fn(server)))
            except Exception as e:  # a failed client is a missing row
                print("gateway_jc: %s failed: %s %s" % (name, type(e).__name__, e),
                      file=sys.stderr)
                rows.append((name, None))
    finally:
        server.stop()
    print("\nthrough jupyter-server %s on loopback (%d `pass` runs, a %d-output "
          "cell; load average %.1f)" % (
              __import__("jupyter_server").__version__, runs(), n_outputs(),
              os.getloadavg()[0]))
    print_rows(rows)
    for name, f in rows:
        if f:
            print("%s: %d of %d outputs arrived; client CPU per output "
                  "received %.0f µs, server CPU %.0f µs" % (
                      name, f["outputs_kept"], f["outputs"],
                      f["client_cpu_ms"] * 1000 / max(1, f["outputs_kept"]),
                      f["server_cpu_ms"] * 1000 / max(1, f["outputs_kept"])))
    return 0 if all(f for _, f in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
