"""An MCP stdio client cannot hold the server (and its box) forever: a
client that stops reading ends the session after the write deadline (exit
7), --idle-timeout and --max-lifetime hold while we are blocked writing or
while a tool runs, and what waits while a tool runs is bounded (messages
and bytes; a refused request gets a JSON-RPC error, cancellations still
act).
"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_tap import BIN, INIT, done, ok, private_env  # noqa: E402

T, ENV = private_env("ja-mcp-stdio-")
RUN = ENV["XDG_RUNTIME_DIR"]


def line(m):
    return (m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n"


def call(i, code, timeout=None):
    a = {"code": code}
    if timeout:
        a["timeout"] = timeout
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "python", "arguments": a}}


def boxes():
    return [n for n in os.listdir(RUN) if n.startswith("ja-sb-")]


class Server:
    """`mcp` on pipes; responses collected by a reader thread (or not)."""

    def __init__(self, *args, read=True):
        self.p = subprocess.Popen([BIN, "mcp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=ENV)
        self.got = {}
        self.cond = threading.Condition()
        self.err = b""
        threading.Thread(target=self._err, daemon=True).start()
        if read:
            threading.Thread(target=self._read, daemon=True).start()

    def _err(self):
        self.err = self.p.stderr.read()

    def _read(self):
        for raw in self.p.stdout:
            m = json.loads(raw)
            if "id" in m:
                with self.cond:
                    self.got[m["id"]] = (time.time(), m)
                    self.cond.notify_all()

    def send(self, *msgs):
        self.p.stdin.write(b"".join(line(m) for m in msgs))
        self.p.stdin.flush()

    def wait(self, ids, timeout):
        end = time.time() + timeout
        with self.cond:
            while not all(i in self.got for i in ids):
                left = end - time.time()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def stop(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            return self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait()


# ---- a client that stops reading ------------------------------------------

s = Server(read=False)
s.send(INIT, *({"jsonrpc": "2.0", "id": i, "method": "tools/list"}
               for i in range(1, 201)))
t0 = time.time()
try:
    rc = s.p.wait(timeout=120)
except subprocess.TimeoutExpired:
    rc = None
    s.p.kill()
    s.p.wait()
ok(rc == 7, "stdio: a client that stops reading ends the server with exit 7 "
   "(write deadline), within the test's 120 s", (rc, time.time() - t0))
time.sleep(0.5)
ok(b"stopped reading" in s.err, "stdio: the log says the client stopped "
   "reading", s.err[-600:])

# --idle-timeout holds while we are blocked writing to that client.
s = Server("--idle-timeout", "2", read=False)
s.send(INIT, call(1, "1"))
end = time.time() + 120
while time.time() < end and not boxes():
    time.sleep(0.2)
had = boxes()
time.sleep(4)  # the call ends; then we block on the flood below
s.send(*({"jsonrpc": "2.0", "id": i, "method": "tools/list"}
         for i in range(2, 202)))
end = time.time() + 25  # less than the write deadline
while time.time() < end and boxes():
    time.sleep(0.2)
ok(had and not boxes(), "stdio: --idle-timeout stops the box while the "
   "server is blocked writing to a client that does not read",
   (had, boxes()))
s.p.kill()
s.p.wait()

# --max-lifetime holds while a tool runs.
s = Server("--max-lifetime", "4", "--timeout", "0")
s.send(INIT, call(1, "import time\ntime.sleep(60)\nprint('slept')", 120))
answered = s.wait([1], 100)
r = s.got.get(1, (0, {}))[1].get("result", {})
txt = json.dumps(r)
ok(answered and r.get("isError") and "max-lifetime" in txt and "slept" not in txt,
   "stdio: --max-lifetime interrupts a running cell and says so", txt[:500])
s.send(call(2, "print(40 + 2)"))
s.wait([2], 120)
txt = json.dumps(s.got.get(2, (0, {}))[1])
ok("42" in txt, "stdio: the next call gets a fresh kernel", txt[:300])
s.stop()

# ---- what waits while a tool runs is bounded ------------------------------

s = Server()
s.send(INIT, call(1, "1"))
s.wait([1], 120)  # the kernel is up
s.send(call(2, "import time\ntime.sleep(6)"))
time.sleep(1)
pings = list(range(100, 400))
s.send(*({"jsonrpc": "2.0", "id": i, "method": "ping"} for i in pings))
s.wait(pings + [2], 120)
busy = [i for i in pings if s.got.get(i, (0, {}))[1].get("error", {})
        .get("code") == -32000]
fine = [i for i in pings if "result" in s.got.get(i, (0, {}))[1]]
ok(len(fine) == 256 and len(busy) == 44,
   "stdio: while a tool runs, 256 messages wait; 44 more pings are refused "
   "with -32000", (len(fine), len(busy)))
msg = s.got[busy[0]][1]["error"]["message"] if busy else ""
ok("256 messages" in msg and "send it again" in msg,
   "stdio: the refusal states the bound and what to do", msg)
ok(busy and s.got[busy[0]][0] < s.got[2][0],
   "stdio: refusals are answered at once, before the running call ends")

pad = "A" * (7 * 1024 * 1024)
s.send(call(3, "import time\ntime.sleep(20)"))
time.sleep(1)
s.send(*({"jsonrpc": "2.0", "id": i, "method": "ping",
          "params": {"pad": pad}} for i in (500, 501, 502)))
s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 3}})
s.wait([500, 501, 502], 120)
codes = [s.got.get(i, (0, {}))[1].get("error", {}).get("code")
         for i in (500, 501, 502)]
ok(codes == [None, None, -32000], "stdio: at most 16 MiB waits: the third "
   "7 MiB message is refused", codes)
time.sleep(2)
ok(3 not in s.got, "stdio: a cancellation still acts while the queue is "
   "over its byte bound (no response for the cancelled call)",
   s.got.get(3))
s.send({"jsonrpc": "2.0", "id": 600, "method": "ping"})
ok(s.wait([600], 60), "stdio: the session answers afterwards")
ok(s.stop() == 0, "stdio: the server exits 0 at end of input")

done(T)
