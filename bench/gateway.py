"""gateway: jupyter-agent through a Jupyter Server (issue 15), side by side
with the Python reference on the same server, and ratios.

    BUILD=build /usr/bin/python3 bench/gateway.py

One jupyter-server (bench/gateway_jc.py's Server: Debian's 1.23, loopback,
random token, IOPub rate limits off) serves both sides:

  - whole `exec -c pass` command (start a remote kernel, run, delete it,
    exit), p50 / p99 over GATEWAY_EXEC_RUNS (default 10; QUICK=1: 3), vs a
    Python script doing the same with jupyter_server's GatewayKernelManager;
  - `pass` round trip inside one session: `run` on a notebook of N `pass`
    cells minus `run` on a 1-cell notebook, per cell (it includes run's own
    per-cell bookkeeping), vs the mean round trip of gateway_jc.py's
    clients;
  - the 20 000-output cell: `exec` wall and client CPU (getrusage of the
    jupyter-agent process; the kernel lives under the server) minus a
    `pass` exec's, per output, vs gateway_jc.py's clients. The local ZeroMQ
    path's cost per message is `make bench`'s clientcpu row.

Timings are printed, never asserted. Needs `exec --gateway` (issue 15):
with a binary that lacks it, our rows say so and the exit status is 1.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
import gateway_jc  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
QUICK = gateway_jc.QUICK
JC_EXEC = r"""
import asyncio, sys
import jupyter_server.gateway.managers as managers
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelManager
url, token = sys.argv[1], sys.argv[2]
gc = GatewayClient.instance()
gc.url, gc.auth_token = url, token
gc.init_static_args()
real = managers.websocket.create_connection
def with_token(u, **kw):
    kw.setdefault("header", ["Authorization: token " + token])
    return real(u, **kw)
managers.websocket.create_connection = with_token
async def main():
    km = GatewayKernelManager()
    await km.start_kernel(kernel_name="python3")
    kc = km.client()
    await kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    # execute_interactive polls ZeroMQ sockets this client does not have:
    # wait for the reply and idle through its queues, as gateway_jc.py does.
    msg_id = kc.execute("pass")
    replied = idle = False
    while not (replied and idle):
        try:
            m = await kc.get_shell_msg(timeout=0.001)
            replied = replied or m["parent_header"].get("msg_id") == msg_id
        except Exception:
            pass
        try:
            m = await kc.get_iopub_msg(timeout=0.001)
        except Exception:
            continue
        idle = idle or (m["parent_header"].get("msg_id") == msg_id and
                        m["msg_type"] == "status" and
                        m["content"]["execution_state"] == "idle")
    kc.stop_channels()
    await km.shutdown_kernel(now=True)
asyncio.run(main())
"""


def timed(argv, env, lines=None):
    """(wall ms, client CPU ms, rc, stderr tail) of one command; `lines`, a
    list, gets the number of lines it printed."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    if lines is not None:
        lines.append(p.stdout.count(b"\n"))
    wall = (time.perf_counter() - t0) * 1000.0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)) * 1000.0
    return wall, cpu, p.returncode, p.stderr.decode(errors="replace")[-300:]


def notebook(path, cells):
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3",
                                      "display_name": "Python 3",
                                      "language": "python"}},
          "cells": [{"cell_type": "code", "id": "c%d" % i, "metadata": {},
                     "source": "pass", "outputs": [],
                     "execution_count": None} for i in range(cells)]}
    with open(path, "w") as f:
        json.dump(nb, f)


def main():
    ours = os.path.join(BUILD, "jupyter-agent")
    exec_runs = 3 if QUICK else benchlib.env_int("GATEWAY_EXEC_RUNS", 10)
    cells = 30 if QUICK else benchlib.env_int("GATEWAY_CELLS", 200)
    n = gateway_jc.n_outputs()
    server = gateway_jc.Server()
    tmp = tempfile.mkdtemp(prefix="ja-bench-gw-ours-")
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(server.token + "\n")
    env = dict(os.environ, HOME=os.path.join(tmp, "home"),
               XDG_RUNTIME_DIR=tmp)
    os.makedirs(env["HOME"])
    env.pop("JUPYTER_GATEWAY_URL", None)
    env.pop("JUPYTER_GATEWAY_AUTH_TOKEN", None)
    gw = ["--gateway", server.url, "--gateway-token-file", token_file]
    failures = []
    ours_exec, jc_exec = [], []
    try:
        # Python reference clients first (round trip, output cell).
        ref = {}
        for name, fn in gateway_jc.CLIENTS:
            try:
                ref[name] = fn(server)
            except Exception as e:
                print("gateway: %s failed: %s %s" % (name, type(e).__name__, e),
                      file=sys.stderr)
        # Whole commands, interleaved run by run.
        for _ in range(exec_runs):
            w, _, rc, err = timed([ours, "exec"] + gw + ["-c", "pass"], env)
            if rc == 0:
                ours_exec.append(w)
            else:
                failures.append("exec -c pass: exit %d: %s" % (rc, err.strip()))
            w, _, rc, err = timed([sys.executable, "-c", JC_EXEC, server.url,
                                   server.token], env)
            if rc == 0:
                jc_exec.append(w)
        # Round trip inside one session: run N cells vs 1 cell.
        nb1, nbn = os.path.join(tmp, "one.ipynb"), os.path.join(tmp, "many.ipynb")
        notebook(nb1, 1)
        notebook(nbn, cells)
        per_cell = None
        w1, _, rc1, err1 = timed([ours, "run"] + gw + [nb1, "-o", nb1 + ".out"], env)
        wn, _, rcn, errn = timed([ours, "run"] + gw + [nbn, "-o", nbn + ".out"], env)
        if rc1 == 0 and rcn == 0:
            per_cell = (wn - w1) / (cells - 1)
        else:
            failures.append("run: exit %d/%d: %s" % (rc1, rcn, (err1 or errn).strip()))
        # The output cell, minus a pass exec.
        wp, cp, rcp, _ = timed([ours, "exec"] + gw + ["-c", "pass"], env)
        printed = []
        wo, co, rco, erro = timed([ours, "exec"] + gw + [
            "--max-output", "1G", "-c", gateway_jc.outputs_cell(n)], env,
            printed)
        cell = None
        if rcp == 0 and rco == 0:
            cell = (wo - wp, co - cp, printed[0])
        else:
            failures.append("exec (outputs): exit %d: %s" % (rco, erro.strip()))
    finally:
        server.stop()
        subprocess.run(["rm", "-rf", tmp])

    print("\njupyter-agent through jupyter-server %s on loopback (load average %.1f)"
          % (__import__("jupyter_server").__version__, os.getloadavg()[0]))
    gateway_jc.print_rows(list(ref.items()))

    def pp(s):
        return "%7.0f %7.0f" % (benchlib.median(s), benchlib.percentile(s, 99)) \
            if s else "  failed"
    print("\nwhole `exec -c pass` command, ms (%d runs)     p50     p99" % exec_runs)
    print("%-44s %s" % ("ours: exec --gateway", pp(ours_exec)))
    print("%-44s %s" % ("GatewayKernelManager script", pp(jc_exec)))
    if ours_exec and jc_exec:
        print("ratio exec p50, GatewayKernelManager / ours: %.2fx" % (
            benchlib.median(jc_exec) / benchlib.median(ours_exec)))
    if per_cell is not None:
        print("ours: `pass` per cell in one `run` session (%d cells): %.2f ms"
              % (cells, per_cell))
        for name, f in ref.items():
            print("ratio round trip, %s p50 / ours per cell: %.2fx" % (
                name, f["pass_p50_ms"] / per_cell))
    if cell is not None:
        wall, cpu, got = cell
        print("ours: %d-output cell, %d arrived: %.0f ms wall, client CPU "
              "%.0f ms (%.0f µs per output received)" % (
                  n, got, wall, cpu, cpu * 1000 / max(1, got)))
        for name, f in ref.items():
            theirs = f["client_cpu_ms"] / max(1, f["outputs_kept"])
            print("ratio client CPU per output received, %s / ours: %.2fx" % (
                name, theirs / (cpu / max(1, got)) if cpu > 0 and got else
                float("nan")))
            print("ratio cell wall, %s / ours: %.2fx" % (
                name, f["cell_wall_ms"] / wall if wall > 0 else float("nan")))
    for f in dict.fromkeys(failures):
        print("ours: failed: %s" % f)
    return 1 if failures or len(ref) < len(gateway_jc.CLIENTS) else 0


if __name__ == "__main__":
    sys.exit(main())
