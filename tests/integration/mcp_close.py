"""`jupyter-agent mcp --http`: ending a session (DELETE) answers without
waiting for the session's kernel to die, and the server still kills, waits
for and removes every box afterwards: no process, zombie, cgroup or run dir
is left. `mcp` over stdio, which hands its box off when its input ends,
leaves nothing behind either.

How "does not wait" is shown without timing anything: each session's box
is frozen (a cgroup v1 freezer group of the test's own, which the sandbox
does not use), so SIGKILL cannot end its processes until it is thawed. The
DELETEs must all be answered while the boxes are frozen (a server that waits
for the kernel's death would not answer before the thaw); after the thaw
everything must go. Skipped without the v1 freezer or root. TAP.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("JUPYTER_AGENT_BIN", "build/jupyter-agent")
FREEZER = "/sys/fs/cgroup/freezer"
N_SESSIONS = 3
N = 0
FAILED = 0


def ok(cond, what, diag=None):
    global N, FAILED
    N += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (N, what))
    if not cond:
        FAILED += 1
        if diag is not None:
            for line in str(diag)[:3000].splitlines():
                print("# " + line)
    sys.stdout.flush()


if os.geteuid() != 0 or not os.path.exists(os.path.join(FREEZER, "cgroup.procs")):
    print("1..0 # SKIP needs root and the cgroup v1 freezer")
    sys.exit(0)

T = tempfile.mkdtemp(prefix="ja-mcp-close-")
os.chmod(T, 0o711)  # the box user reaches the run dirs made in here
RUN = os.path.join(T, "run")
os.makedirs(RUN, mode=0o711)
os.makedirs(os.path.join(T, "home"))
ENV = dict(os.environ, XDG_RUNTIME_DIR=RUN, HOME=os.path.join(T, "home"),
           JUPYTER_AGENT_SERVE_SOCKET=os.path.join(T, "no-serve.sock"))
ICE = os.path.join(FREEZER, os.path.basename(T))
SERVER_LOG = []  # the HTTP server's stderr lines, for diagnostics


def post(port, body, headers=None, timeout=180):
    h = {"Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/mcp", body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        raw = r.read()
    except (OSError, http.client.HTTPException) as e:
        log = b"".join(SERVER_LOG)
        # A sanitizer's report from its first line; otherwise the log's end.
        at = log.find(b"ERROR: AddressSanitizer")
        shown = log[at:at + 2500] if at >= 0 else log[-2000:]
        return None, {}, ("no answer: %r; server's log: %s" % (
            e, shown.decode(errors="replace"))).encode()
    finally:
        c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, raw


def delete(port, sid, timeout):
    """The DELETE's status, or the error that stood for it (no answer)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("DELETE", "/mcp", headers={"MCP-Session-Id": sid})
        return c.getresponse().status
    except OSError as e:
        return "no answer: %s" % e
    finally:
        c.close()


def box_cgroups(pid):
    """The pids-controller cgroups of the boxes server `pid` made."""
    out = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup/pids"):
        out += [os.path.join(root, d) for d in dirs
                if re.search(r"(^|-)%d-[A-Za-z0-9]+$" % pid, d)]
    return out


def all_box_cgroups(pid):
    out = []
    for ctl in os.listdir("/sys/fs/cgroup"):
        for root, dirs, _ in os.walk(os.path.join("/sys/fs/cgroup", ctl)):
            out += [os.path.join(root, d) for d in dirs
                    if re.search(r"(^|-)%d-[A-Za-z0-9]+$" % pid, d)]
    return out


def procs(cgroup):
    try:
        with open(os.path.join(cgroup, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def zombies_of(ppid):
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == ppid:
            found.append(int(d))
    return found


def freezer(state):
    with open(os.path.join(ICE, "freezer.state"), "w") as f:
        f.write(state)


srv = subprocess.Popen([BIN, "mcp", "--http", "127.0.0.1:0",
                        "--max-sessions", str(N_SESSIONS)], env=ENV,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
port = None
deadline = time.time() + 60
while time.time() < deadline:
    line = srv.stderr.readline()
    m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)/mcp", line)
    if m:
        port = int(m.group(1))
        threading.Thread(target=lambda: SERVER_LOG.extend(
            iter(srv.stderr.readline, b"")), daemon=True).start()
        break
    if not line and srv.poll() is not None:
        break
try:
    if port is None:
        print("Bail out! mcp --http did not start")
        sys.exit(1)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "close-test", "version": "0"}}}
    sids, started = [], True
    for i in range(N_SESSIONS):
        st, h, _ = post(port, init)
        sid = h.get("mcp-session-id")
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "python", "arguments": {"code": "6 * 7"}}}
        st2, _, raw = post(port, call, {"MCP-Session-Id": sid,
                                        "MCP-Protocol-Version": "2025-11-25"})
        started &= st == 200 and st2 == 200 and b"42" in raw
        sids.append(sid)
    groups = box_cgroups(srv.pid)
    box_pids = [p for g in groups for p in procs(g)]
    ok(started and len(groups) == N_SESSIONS and box_pids,
       "%d sessions each ran code in a box of their own" % N_SESSIONS,
       (started, groups, box_pids))

    os.mkdir(ICE)
    for p in box_pids:
        with open(os.path.join(ICE, "cgroup.procs"), "w") as f:
            f.write(str(p))
    freezer("FROZEN")
    # A DELETE that waited for the kernel's death would not be answered
    # before the thaw below; the generous timeout only bounds the test.
    codes = [delete(port, sid, 120) for sid in sids]
    still = [p for p in box_pids if alive(p)]
    ok(codes == [200] * N_SESSIONS and still,
       "closing %d sessions in a row is answered while their kernels "
       "cannot die yet (the close does not wait for them)" % N_SESSIONS,
       (codes, still))
    st, _, _ = post(port, {"jsonrpc": "2.0", "id": 3, "method": "ping"},
                    {"MCP-Session-Id": sids[0]})
    ok(st == 404, "a closed session's id is 404 at once", st)
    st, _, raw = post(port, init)
    ok(st == 503 and b"max-sessions" in raw,
       "boxes still being removed count against --max-sessions (a new "
       "session is refused while %d closed ones cannot die)" % N_SESSIONS,
       (st, raw[:2900]))
    freezer("THAWED")

    def leftovers():
        return {"processes": [p for p in box_pids if alive(p)],
                "zombies": zombies_of(srv.pid),
                "cgroups": all_box_cgroups(srv.pid),
                "run dirs": [n for n in os.listdir(RUN) if n.startswith("ja-sb-")]}

    deadline = time.time() + 60
    while time.time() < deadline and any(leftovers().values()):
        time.sleep(0.2)
    left = leftovers()
    ok(not any(left.values()),
       "afterwards no process, zombie, cgroup or run dir of the closed "
       "sessions is left (the server is still running)", left)
    st, h, _ = post(port, init)
    ok(st == 200 and h.get("mcp-session-id"),
       "the server takes new sessions after the closes", st)
    if st == 200:
        delete(port, h["mcp-session-id"], 120)
    srv.terminate()
    ok(srv.wait(timeout=120) == 0, "SIGTERM then stops the server cleanly")
    left = {"cgroups": all_box_cgroups(srv.pid),
            "run dirs": [n for n in os.listdir(RUN) if n.startswith("ja-sb-")]}
    ok(not any(left.values()), "nothing is left after the server stopped", left)

    # stdio: at the end of input the process hands its box off and exits;
    # the reaper it leaves removes the box.
    msgs = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "python", "arguments": {"code": "6 * 7"}}}]
    p = subprocess.Popen([BIN, "mcp"], env=ENV, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, _ = p.communicate(("\n".join(json.dumps(m) for m in msgs) +
                            "\n").encode(), timeout=300)
    ok(p.returncode == 0 and b"42" in out,
       "mcp over stdio answers and exits 0 at the end of its input",
       (p.returncode, out[-500:]))
    deadline = time.time() + 60
    left = None
    while time.time() < deadline:
        left = {"cgroups": all_box_cgroups(p.pid),
                "run dirs": [n for n in os.listdir(RUN)
                             if n.startswith("ja-sb-")]}
        if not any(left.values()):
            break
        time.sleep(0.2)
    ok(not any(left.values()),
       "after mcp over stdio exits, no cgroup or run dir of its box is left",
       left)
finally:
    if os.path.isdir(ICE):
        try:
            freezer("THAWED")
        except OSError:
            pass
    if srv.poll() is None:
        srv.kill()
        srv.wait()
    if os.path.isdir(ICE):
        for _ in range(50):
            try:
                os.rmdir(ICE)
                break
            except OSError:
                time.sleep(0.1)
    shutil.rmtree(T, ignore_errors=True)
print("1..%d" % N)
sys.exit(1 if FAILED else 0)
