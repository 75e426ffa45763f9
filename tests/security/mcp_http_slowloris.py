"""Half-open and trickling connections cannot lock clients out of
`jupyter-agent mcp --http` (issue 24 item 4): headers have a deadline
however slowly they trickle, one address's incomplete connections older
than 2 s are capped at 32 (the oldest are closed), and connections cost
no thread, so a client's initialize and a tool call, and 100 concurrent
clients from the same address, succeed while 600 half-open connections
are held. Long calls
(30 s cells, SSE progress) still flow without blocking other clients,
and one session's waiting requests cannot take every worker.

No speed is asserted: only that things complete within the test's
generous deadlines, or in the order that shows nothing waited.
"""
import http.client
import json
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_tap import HDR, INIT, done, ok, post, private_env, start_http  # noqa: E402

T, ENV = private_env("ja-mcp-slow-")
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))


def init(port, timeout=60):
    st, h, j = post(port, INIT, timeout=timeout)
    return st, {"MCP-Session-Id": h.get("mcp-session-id", "")}


def pycall(i, code, token=None):
    p = {"name": "python", "arguments": {"code": code}}
    if token is not None:
        p["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": p}


def closed(sock):
    """Has the server closed `sock`? (Never blocks.)"""
    try:
        r, _, _ = select.select([sock], [], [], 0)
        if not r:
            return False
        return sock.recv(4096) == b""
    except OSError:
        return True


def half_open(port, src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return s


srv, port = start_http(ENV, "--timeout", "0", "--max-sessions", "200")

# ---- a header deadline, however often a byte arrives ----------------------
s = half_open(port)
quiet = socket.create_connection(("127.0.0.1", port), timeout=10)
t0 = time.time()
cut = cut_quiet = None
while time.time() - t0 < 40 and (cut is None or cut_quiet is None):
    if cut is None:
        try:
            s.sendall(b"X")  # one more byte of a header line every second
        except OSError:
            cut = time.time() - t0
        if cut is None and closed(s):
            cut = time.time() - t0
    if cut_quiet is None and closed(quiet):
        cut_quiet = time.time() - t0
    time.sleep(1)
s.close()
quiet.close()
ok(cut is not None, "http: a connection trickling its headers a byte a "
   "second is closed (10 s header deadline), within the test's 40 s", cut)
ok(cut_quiet is not None, "http: a connection that sends nothing is closed "
   "too (10 s), within the test's 40 s", cut_quiet)

# ---- one address's old incomplete connections are capped -----------------
socks = [half_open(port, "127.0.0.2") for _ in range(100)]
time.sleep(1)
young = [x for x in socks if not closed(x)]
ok(len(young) == 100, "http: 100 incomplete connections younger than 2 s "
   "all stay open", len(young))
time.sleep(3)
still = [x for x in socks if not closed(x)]
ok(len(still) <= 32, "http: once older than 2 s, at most 32 of them stay "
   "open", len(still))
ok(still and all(x in socks[-32:] for x in still),
   "http: the ones closed are the oldest", [socks.index(x) for x in still])
for x in socks:
    x.close()

# ---- 600 half-open connections, held and renewed, from the same address ---
stop = threading.Event()
held = []
lock = threading.Lock()


def slowloris():
    while not stop.is_set():
        with lock:
            live = [x for x in held if not closed(x)]
            for x in held:
                if x not in live:
                    x.close()
            held[:] = live
        for _ in range(min(100, 600 - len(held))):
            try:
                x = half_open(port)
            except OSError:
                break
            with lock:
                held.append(x)
        with lock:
            for x in held:
                try:
                    x.send(b"X")
                except OSError:
                    pass
        time.sleep(0.5)


for _ in range(600):
    try:
        held.append(half_open(port))
    except OSError:
        break
opened = len(held)
attacker = threading.Thread(target=slowloris, daemon=True)
attacker.start()
time.sleep(1)
st, S = init(port, timeout=30)
ok(opened == 600 and st == 200, "http: while 600 half-open connections are "
   "held (and renewed), a client's initialize succeeds", (opened, st))
st, _, j = post(port, pycall(2, "print(6 * 7)"), S, timeout=180)
ok(st == 200 and "42" in json.dumps(j), "http: ... and so does a tool call",
   (st, j))
crowd = []
clock = threading.Lock()


def one_client(i):
    try:
        r = one_session()
    except (OSError, http.client.HTTPException) as e:
        r = ("error", repr(e)[:80])
    with clock:
        crowd.append(r)


def one_session():
    st, h, _ = post(port, INIT, timeout=120)
    sid = {"MCP-Session-Id": h.get("mcp-session-id", "")}
    st2, _, _ = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, sid,
                     timeout=120)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("DELETE", "/mcp", headers=sid)
    st3 = c.getresponse().status
    c.close()
    return (st, st2, st3)


cs = [threading.Thread(target=one_client, args=(i,)) for i in range(100)]
for c in cs:
    c.start()
for c in cs:
    c.join(180)
good = [r for r in crowd if r == (200, 200, 200)]
ok(len(good) == 100, "http: ... and 100 concurrent clients from the same "
   "address each initialize, ping and end their session",
   (len(good), [r for r in crowd if r != (200, 200, 200)][:10]))

# ---- long calls do not block other clients --------------------------------
# A: a 30 s cell reporting progress over SSE; B: a 20 s cell answered in
# JSON; C: initialize, ping and a short cell while both run.
stA, SA = init(port)
stB, SB = init(port)
events = []
elock = threading.Lock()


def note(what):
    with elock:
        events.append((time.time(), what))


def run_a():
    try:
        stream_a()
    except (OSError, http.client.HTTPException, ValueError) as e:
        note("a failed: %r" % e)


def stream_a():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = pycall(3, "import time\nfor i in range(10):\n"
                     "    print('tick', i, flush=True)\n    time.sleep(3)\n"
                     "print('a done')", token="tA")
    c.request("POST", "/mcp", body=json.dumps(body).encode(),
              headers=dict(HDR, **SA))
    r = c.getresponse()
    ticks = 0
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        m = json.loads(line[5:])
        if m.get("method") == "notifications/progress":
            ticks += 1
            note("tick")
        elif m.get("id") == 3:
            note("a: " + json.dumps(m)[:400])
            break
    note("a ticks %d" % ticks)
    c.close()


def run_b():
    st, _, j = post(port, pycall(4, "import time\ntime.sleep(20)\n"
                                    "print('b done')"), SB, timeout=120)
    note("b: %s %s" % (st, json.dumps(j)[:300]))


ta = threading.Thread(target=run_a)
tb = threading.Thread(target=run_b)
ta.start()
tb.start()
time.sleep(4)
stC, SC = init(port)
stp, _, jp = post(port, {"jsonrpc": "2.0", "id": 5, "method": "ping"}, SC)
stq, _, jq = post(port, pycall(6, "print(2 + 3)"), SC, timeout=120)
note("c: %s %s %s" % (stC, stp, json.dumps(jq)[:200]))
ta.join(150)
tb.join(150)
stop.set()
attacker.join(30)
kinds = [w.split(":")[0].split(" ")[0] for _, w in events]
text = {w.split(":")[0]: w for _, w in events}
ok("a" in text and "a done" in text["a"] and '"isError": false' in text["a"],
   "http: a 30 s cell over SSE completes", events[-4:])
ok("a ticks 11" in [w for _, w in events],
   "http: its progress notifications stream while it runs",
   [w for _, w in events if w.startswith("a ticks")])
ok("b" in text and "b done" in text["b"] and text["b"].startswith("b: 200"),
   "http: a 20 s cell answered as JSON completes", text.get("b"))
ok("c" in text and text["c"].startswith("c: 200 200") and "5" in text["c"]
   and "a" in kinds and "b" in kinds
   and kinds.index("c") < kinds.index("b") < kinds.index("a"),
   "http: a third client's initialize, ping and cell finish while the long "
   "cells still run", [(round(t - events[0][0], 1), w[:60])
                       for t, w in events if not w == "tick"])
first_tick = next((t for t, w in events if w == "tick"), None)
ok(first_tick is not None and first_tick < next((t for t, w in events
                                                 if w.startswith("b")), 0),
   "http: progress arrives before the other long cell ends (nothing "
   "waits for it)")
for x in held:
    x.close()

# ---- one session cannot take every worker ---------------------------------
stD, SD = init(port)
post(port, pycall(7, "1"), SD, timeout=180)  # its kernel is up
results = []
rlock = threading.Lock()


def one(body, headers, timeout=120):
    r = post(port, body, headers, timeout=timeout)
    with rlock:
        results.append((body.get("id"), r[0], r[2]))


long_call = threading.Thread(target=one, args=(
    pycall(8, "import time\ntime.sleep(15)"), SD))
long_call.start()
time.sleep(2)
waiters = [threading.Thread(target=one, args=(
    {"jsonrpc": "2.0", "id": 100 + i, "method": "ping"}, SD))
    for i in range(12)]
for w in waiters:
    w.start()
time.sleep(2)
stE, SE = init(port)
stp, _, _ = post(port, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, SE)
stc, _, _ = post(port, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 8}}, SD)
for w in waiters + [long_call]:
    w.join(150)
refused = [r for r in results if r[1] == 503]
ok(len(refused) == 5 and all("8 requests" in json.dumps(r[2])
                             for r in refused),
   "http: one session may have 8 requests in progress; more are refused "
   "with 503 saying so", [(r[0], r[1]) for r in results])
ok(stE == 200 and stp == 200 and stc == 202,
   "http: meanwhile another session is served, and the cancellation for the "
   "busy session is taken", (stE, stp, stc))
ok(srv.poll() is None, "http: the server is still running")
srv.terminate()
try:
    rc = srv.wait(timeout=90)
except subprocess.TimeoutExpired:
    rc = "still running 90 s after SIGTERM"
    srv.kill()
    srv.wait()
srv.tail_reader.join(timeout=10)
ok(rc == 0, "http: SIGTERM stops it cleanly",
   "exit status %s; the server's last words:\n%s"
   % (rc, "\n".join(srv.stderr_tail)))
done(T)
