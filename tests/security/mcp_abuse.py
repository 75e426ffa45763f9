"""Protocol abuse against `jupyter-agent mcp` (stdio and Streamable HTTP).

Each check is one TAP line naming the guarantee. Everything listens on
127.0.0.1 with a free port; private XDG_RUNTIME_DIR and HOME.
"""
import http.client
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcp_tap  # noqa: E402

BIN = os.environ.get("JUPYTER_AGENT_BIN", "build/jupyter-agent")
T = tempfile.mkdtemp(prefix="ja-mcp-abuse-")
os.chmod(T, 0o755)
ENV = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(T, "run"),
           HOME=os.path.join(T, "home"))
os.makedirs(ENV["XDG_RUNTIME_DIR"], mode=0o755)
os.makedirs(ENV["HOME"])
N = 0
FAILED = 0


def ok(cond, what, diag=None):
    global N, FAILED
    N += 1
    if cond:
        print(f"ok {N} - {what}")
    else:
        FAILED += 1
        print(f"not ok {N} - {what}")
        if diag is not None:
            for line in str(diag)[:3000].splitlines():
                print(f"# {line}")
    sys.stdout.flush()


def init_msg(version="2025-11-25", id_=1):
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "abuse", "version": "0"}}}


# ---- stdio ------------------------------------------------------------------

def stdio(lines, args=()):
    data = b"".join((l if isinstance(l, bytes) else
                     (l if isinstance(l, str) else json.dumps(l)).encode())
                    + b"\n" for l in lines)
    p = subprocess.run([BIN, "mcp", *args], input=data, env=ENV,
                       capture_output=True, timeout=120)
    out = [json.loads(l) for l in p.stdout.decode().splitlines() if l]
    return p.returncode, out, p.stderr.decode()


rc, out, err = stdio([
    "{not json",
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {"jsonrpc": "1.0", "id": 2, "method": "ping"},
    init_msg(id_=3),
    {"jsonrpc": "2.0", "id": 4, "method": "no/such"},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {}},
    {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
     "params": {"name": "nope", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
     "params": {"name": "python", "arguments": "code"}},
    {"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {}},
    "[]",
    '"a string"',
    {"jsonrpc": "2.0", "id": None, "method": "ping"},
    {"jsonrpc": "2.0", "id": 9, "method": "ping"},
])
codes = [(m.get("id"), m.get("error", {}).get("code")) for m in out]
ok(rc == 0, "stdio: the server survives garbage and exits 0 at end of input",
   err)
ok(codes[0] == (None, -32700), "stdio: invalid JSON is answered -32700",
   codes)
ok(codes[1] == (1, -32600),
   "stdio: a request before initialize is refused with -32600", codes)
ok(codes[2] == (None, -32600) or codes[2] == (2, -32600),
   "stdio: jsonrpc other than 2.0 is -32600", codes)
ok(out[3].get("result", {}).get("protocolVersion") == "2025-11-25",
   "stdio: initialize still works after the garbage", out[3])
ok(codes[4] == (4, -32601), "stdio: an unknown method is -32601", codes)
ok(codes[5] == (5, -32602), "stdio: tools/call without a name is -32602",
   codes)
ok(codes[6] == (6, -32602), "stdio: an unknown tool is -32602", codes)
ok(codes[7] == (7, -32602), "stdio: arguments that are not an object are "
   "-32602", codes)
ok(codes[8] == (8, -32602) or codes[8] == (8, -32600),
   "stdio: a second, malformed initialize is refused", codes)
ok(codes[9][1] == -32600 and codes[10][1] == -32600,
   "stdio: an empty batch and a bare string are -32600", codes)
ok(codes[11][1] == -32600, "stdio: a null id is -32600 (MCP ids are "
   "strings or integers)", codes)
ok(codes[12] == (9, None) and "result" in out[12],
   "stdio: the session still answers after all of it", out[-1])

big = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"' + \
    b"A" * (10 * 1024 * 1024) + b'"}}'
rc, out, err = stdio([init_msg(), big,
                      {"jsonrpc": "2.0", "id": 3, "method": "ping"}])
ok(len(out) == 3 and out[1].get("error", {}).get("code") == -32600 and
   "8 MiB" in out[1]["error"]["message"],
   "stdio: a 10 MB message is refused with -32600 stating the 8 MiB cap",
   out[1:2])
ok(len(out) == 3 and out[2].get("id") == 3 and "result" in out[2],
   "stdio: the next message after an oversized one is answered", out)

rc, out, err = stdio([init_msg(), {
    "jsonrpc": "2.0", "id": 2, "method": "tools/call",
    "params": {"name": "python", "arguments": {
        "code": "import time\ntime.sleep(30)", "timeout": 3600}}}],
    ("--timeout", "2"))
txt = json.dumps(out[-1])
ok(len(out) == 2 and "timed out after 2 s" in txt,
   "stdio: a client cannot raise the operator's --timeout", out[-1:])

# A cell right after a failing one must run, not come back "aborted"
# (ipykernel's stop_on_error aborts requests arriving just after an error).
lines = [init_msg()]
for i in range(40):
    for k, code in ((1, "1/0"), (2, "print('ran')")):
        lines.append({"jsonrpc": "2.0", "id": 2 * i + k, "method":
                      "tools/call", "params": {"name": "python",
                                               "arguments": {"code": code}}})
rc, out, err = stdio(lines)
ran = sum(1 for m in out if isinstance(m.get("id"), int) and m["id"] > 0
          and m["id"] % 2 == 0 and "ran" in json.dumps(m.get("result")))
ok(ran == 40, "stdio: a cell sent right after a failing one always runs "
   "(%d of 40)" % ran)

# logging: a session without a sandbox says so to the client (warning),
# unless the client asked only for errors.
py = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
      "params": {"name": "python", "arguments": {"code": "1"}}}
rc, out, err = stdio([init_msg(), py], ("--no-sandbox",))
logs = [m for m in out if m.get("method") == "notifications/message"]
ok(logs and logs[0]["params"]["level"] == "warning" and
   "--no-sandbox" in logs[0]["params"]["data"] and out[-1].get("id") == 2,
   "stdio: --no-sandbox is reported to the client as a warning log message",
   out[:2])
rc, out, err = stdio([init_msg(), {"jsonrpc": "2.0", "id": 9, "method":
                                   "logging/setLevel",
                                   "params": {"level": "error"}}, py],
                     ("--no-sandbox",))
ok(not [m for m in out if m.get("method") == "notifications/message"],
   "stdio: logging/setLevel error silences warnings", out)

# ---- HTTP -------------------------------------------------------------------


def start_http(*args):
    return mcp_tap.start_http(ENV, *args)


def post(port, body, headers=None, timeout=60):
    h = {"Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    c.request("POST", "/mcp", body=data, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        j = json.loads(raw) if raw else None
    except ValueError:
        j = raw
    return r.status, dict(r.getheaders()), j


def new_session(port, headers=None):
    st, h, j = post(port, init_msg(), headers)
    sid = {k.lower(): v for k, v in h.items()}.get("mcp-session-id")
    return st, sid, j


srv, port = start_http("--max-sessions", "5")
st, sid, j = new_session(port)
ok(st == 200 and sid and re.fullmatch(r"[0-9a-f]{32}", sid),
   "http: initialize returns a 128-bit MCP-Session-Id", (st, sid, j))
S = {"MCP-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
st, _, j = post(port, b"{nope", S)
ok(st == 400 and j["error"]["code"] == -32700,
   "http: invalid JSON is 400 with -32700", (st, j))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
ok(st == 400, "http: a request without MCP-Session-Id is 400", (st, j))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                {"MCP-Session-Id": secrets.token_hex(16)})
ok(st == 404, "http: a forged session id is 404", (st, j))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                {"MCP-Session-Id": "../../" + sid})
ok(st == 404, "http: a malformed session id is 404", (st, j))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                dict(S, **{"MCP-Protocol-Version": "2023-01-01"}))
ok(st == 400, "http: an unsupported MCP-Protocol-Version is 400", (st, j))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                dict(S, Origin="http://evil.example"))
ok(st == 403, "http: a foreign Origin is 403 (DNS rebinding)", (st, j))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                dict(S, Origin="http://localhost.evil.example"))
ok(st == 403, "http: an Origin that only starts with localhost is 403",
   (st, j))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                dict(S, Origin="http://localhost:6274"))
ok(st == 200 and j.get("result") == {}, "http: a loopback Origin is served",
   (st, j))
st, _, j = post(port, [{"jsonrpc": "2.0", "id": 2, "method": "ping"}], S)
ok(j and j.get("error", {}).get("code") == -32600,
   "http: a batch in 2025-11-25 is refused with -32600", (st, j))
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/mcp", headers=S)
r = c.getresponse()
r.read()
ok(r.status == 405, "http: GET is 405 (no server stream)", r.status)
c.request("POST", "/other", body=b"{}",
          headers={"Content-Type": "application/json"})
r = c.getresponse()
r.read()
ok(r.status == 404, "http: only /mcp is served", r.status)
c.close()
big = b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"' + \
    b"A" * (10 * 1024 * 1024) + b'"}}'
# Content-Length says 10 MB: refused from the headers, before any body.
s = socket.create_connection(("127.0.0.1", port), timeout=30)
hdr = "".join(f"{k}: {v}\r\n" for k, v in dict(
    S, **{"Content-Type": "application/json", "Accept": "application/json",
          "Content-Length": len(big), "Host": "127.0.0.1"}).items())
s.sendall(b"POST /mcp HTTP/1.1\r\n" + hdr.encode() + b"\r\n" + big[:65536])
resp = b""
try:
    while b"\r\n\r\n" not in resp or len(resp) < 200:
        chunk = s.recv(65536)
        if not chunk:
            break
        resp += chunk
except OSError:
    pass
s.close()
st = int(resp.split(b" ")[1]) if resp.startswith(b"HTTP/1.1 ") else resp[:80]
ok(st == 413 and b"8 MiB" in resp,
   "http: a 10 MB message is refused with 413 stating the cap", resp[:300])
# The same without Content-Length (chunked): cut off at the cap.
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.putrequest("POST", "/mcp")
for k, v in dict(S, **{"Content-Type": "application/json",
                       "Accept": "application/json",
                       "Transfer-Encoding": "chunked"}).items():
    c.putheader(k, v)
c.endheaders()
try:
    for i in range(0, len(big), 1 << 20):
        chunk = big[i:i + (1 << 20)]
        c.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    body = r.read()
    st = r.status
except (ConnectionError, http.client.HTTPException) as e:
    st, body = str(e), b""
c.close()
ok(st == 413 and b"8 MiB" in body,
   "http: a 10 MB chunked message is refused with 413 stating the cap",
   (st, body[:200]))
st, _, j = post(port, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, S)
ok(st == 200 and j.get("result") == {},
   "http: the session still answers after the oversized messages", (st, j))

# 200 concurrent initializes against --max-sessions 5 (1 is live).
results = []
lock = threading.Lock()


def one():
    try:
        st, sid2, j = new_session(port)
    except Exception as e:  # noqa: BLE001 - a dropped connection counts
        st, sid2, j = repr(e), None, None
    with lock:
        results.append((st, sid2, j))


threads = [threading.Thread(target=one) for _ in range(200)]
for t in threads:
    t.start()
for t in threads:
    t.join()
accepted = [r for r in results if r[0] == 200]
refused = [r for r in results if r[0] == 503]
ok(len(accepted) == 4 and len(refused) == 196,
   "http: 200 concurrent sessions over --max-sessions 5: 4 accepted, the "
   "rest refused with 503", sorted({str(r[0]) for r in results}))
ok(all(r[2] and r[2].get("error", {}).get("code") == -32603 and
       "max-sessions" in r[2]["error"]["message"] for r in refused),
   "http: each refusal is a JSON-RPC error naming --max-sessions",
   refused[:1])
for _, sid2, _ in accepted:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("DELETE", "/mcp", headers={"MCP-Session-Id": sid2})
    c.getresponse().read()
    c.close()
st, sid3, j = new_session(port)
ok(st == 200, "http: after DELETE frees them, new sessions are accepted",
   (st, j))
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("DELETE", "/mcp", headers={"MCP-Session-Id": sid3})
c.getresponse().read()
c.close()
st, _, j = post(port, {"jsonrpc": "2.0", "id": 5, "method": "ping"},
                {"MCP-Session-Id": sid3})
ok(st == 404, "http: a session ended by DELETE is 404 afterwards", (st, j))

# Each request on a new connection: the kernel started by the first must
# outlive that connection (and its server thread).
st, sid5, _ = new_session(port)
S5 = {"MCP-Session-Id": sid5, "MCP-Protocol-Version": "2025-11-25"}
call = {"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "python", "arguments": {"code": "kept = 7"}}}
st, _, j = post(port, call, S5, timeout=180)
time.sleep(2)
call["params"]["arguments"]["code"] = "kept * 6"
st, _, j = post(port, call, S5, timeout=180)
txt = json.dumps(j)
ok(st == 200 and "42" in txt and "died" not in txt,
   "http: a session's kernel outlives the connection that started it", j)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("DELETE", "/mcp", headers={"MCP-Session-Id": sid5})
c.getresponse().read()
c.close()

# A client that sends a request for a big answer and never reads it.
post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, S)
code = "print('x' * 20_000_000)"
req = json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                  "params": {"name": "python",
                             "arguments": {"code": code}}}).encode()
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
hdr = "".join(f"{k}: {v}\r\n" for k, v in dict(
    S, **{"Content-Type": "application/json", "Accept": "application/json",
          "Content-Length": len(req), "Host": "127.0.0.1"}).items())
s.sendall(b"POST /mcp HTTP/1.1\r\n" + hdr.encode() + b"\r\n" + req)
time.sleep(20)  # the kernel starts, prints, the answer fills the socket
st2, sid4, j = new_session(port)
st, _, j2 = post(port, {"jsonrpc": "2.0", "id": 7, "method": "ping"},
                 {"MCP-Session-Id": sid4}, timeout=20)
ok(st2 == 200 and st == 200,
   "http: a client that never reads does not block other sessions",
   (st2, st, j2))
s.close()
ok(srv.poll() is None, "http: the server is still running after all abuse")
srv.terminate()
ok(srv.wait(timeout=60) == 0, "http: SIGTERM stops the server cleanly")
left = [n for n in os.listdir(ENV["XDG_RUNTIME_DIR"])
        if n.startswith("ja-sb-")]
ok(left == [], "http: no sandbox is left after the server stopped", left)

# A client that disappears without DELETE: its session (and box) end after
# --idle-timeout.
srv, port = start_http("--idle-timeout", "2")
st, sid6, _ = new_session(port)
S6 = {"MCP-Session-Id": sid6}
st, _, j = post(port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "python",
                                  "arguments": {"code": "1"}}}, S6,
                timeout=180)
boxes = [n for n in os.listdir(ENV["XDG_RUNTIME_DIR"])
         if n.startswith("ja-sb-")]
time.sleep(5)
gone = [n for n in boxes if os.path.exists(
    os.path.join(ENV["XDG_RUNTIME_DIR"], n))]
st, _, j = post(port, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, S6)
ok(boxes and not gone and st == 404,
   "http: a session idle past --idle-timeout ends: its sandbox is removed "
   "and its id is 404", (boxes, gone, st))
srv.terminate()
srv.wait(timeout=60)

# ---- tokens -----------------------------------------------------------------

p = subprocess.run([BIN, "mcp", "--http", "0.0.0.0:0"], env=ENV,
                   capture_output=True, timeout=30)
ok(p.returncode == 2 and b"--token-file" in p.stderr,
   "http: listening beyond loopback without --token-file is refused "
   "(exit 2)", p.stderr)
tok = os.path.join(T, "token")
with open(tok, "w") as f:
    f.write("short\n")
p = subprocess.run([BIN, "mcp", "--http", "127.0.0.1:0", "--token-file",
                    tok], env=ENV, capture_output=True, timeout=30)
ok(p.returncode == 2, "http: a token shorter than 16 characters is refused",
   p.stderr)
token = secrets.token_hex(32)
with open(tok, "w") as f:
    f.write(token + "\n")
srv, port = start_http("--token-file", tok)
st, _, j = new_session(port)
ok(st == 401, "http: without the bearer token: 401", (st, j))
st, _, j = new_session(port, {"Authorization": "Bearer " + token[:-1] + "0"
                              if token[-1] != "0" else "Bearer " +
                              token[:-1] + "1"})
ok(st == 401, "http: a wrong token of the right length: 401", (st, j))
st, _, j = new_session(port, {"Authorization": "Bearer " + token + "x"})
ok(st == 401, "http: a longer token: 401", (st, j))
st, sid, j = new_session(port, {"Authorization": "Bearer " + token})
ok(st == 200 and sid, "http: the right token: a session", (st, j))
srv.terminate()
srv.wait(timeout=60)

print(f"1..{N}")
print(f"{N - FAILED} passed, {FAILED} failed")
subprocess.run(["rm", "-rf", T])
sys.exit(1 if FAILED else 0)
