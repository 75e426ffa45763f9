"""What the MCP attack scripts share: TAP lines, a private environment,
an HTTP server on a free loopback port, and a POST to it."""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("JUPYTER_AGENT_BIN", "build/jupyter-agent")
N = 0
FAILED = 0
HDR = {"Content-Type": "application/json",
       "Accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}}


def ok(cond, what, diag=None):
    """One TAP line naming the guarantee; diag is shown when it fails."""
    global N, FAILED
    N += 1
    FAILED += not cond
    print(("ok %d - %s" if cond else "not ok %d - %s") % (N, what))
    if not cond and diag is not None:
        for line in str(diag)[:2000].splitlines():
            print("# " + line)
    sys.stdout.flush()


def private_env(prefix):
    """A temporary directory T and an environment whose XDG_RUNTIME_DIR
    and HOME are inside it."""
    t = tempfile.mkdtemp(prefix=prefix)
    os.chmod(t, 0o755)
    env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(t, "run"),
               HOME=os.path.join(t, "home"))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o755)
    os.makedirs(env["HOME"])
    return t, env


def done(t):
    """The TAP plan and summary; removes `t`; exits 1 if anything failed."""
    print("1..%d" % N)
    print("%d passed, %d failed" % (N - FAILED, FAILED))
    subprocess.run(["rm", "-rf", t])
    sys.exit(1 if FAILED else 0)


def _keep_tail(p):
    """Read the server's stderr to its end, keeping the last 64 lines in
    p.stderr_tail, so a failed check can show what the server said."""
    for line in iter(p.stderr.readline, b""):
        p.stderr_tail.append(line.decode(errors="replace").rstrip())
        del p.stderr_tail[:-64]


def start_http(env, *args):
    """`mcp --http 127.0.0.1:0 ARGS`: (process, port). The process's
    stderr_tail holds the last lines it wrote to stderr."""
    p = subprocess.Popen([BIN, "mcp", "--http", "127.0.0.1:0", *args],
                         env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = p.stderr.readline()
        m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)/mcp", line)
        if m:
            p.stderr_tail = []
            p.tail_reader = threading.Thread(target=_keep_tail, args=(p,),
                                             daemon=True)
            p.tail_reader.start()
            return p, int(m.group(1))
        if not line and p.poll() is not None:
            break
    raise RuntimeError("server did not start")


def post(port, body, headers=None, timeout=60):
    """(status, headers, JSON); a failure is (its repr, {}, None)."""
    h = dict(HDR, **(headers or {}))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/mcp", body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        raw = r.read()
    except (OSError, http.client.HTTPException) as e:
        return repr(e), {}, None
    finally:
        c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, \
        (json.loads(raw) if raw else None)
