"""--allow-net rules changed by the operator while a session runs (run by
egress_live.sh inside its private mount namespace; argv: BIN T PORT).

For mcp --http, the E2B server and serve: code in a running session is
refused other.test, keeps trying, the operator allows it through the
server's door, and the same running code gets through. The proxy's records
reach --audit and the log verifies. In the MCP box, the code also tries to
change its own rules: the proxy's and the launcher's processes, the fds
of the rules socket and record pipe, and the server's door (directly and
through the proxy)."""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

BIN, T, P = sys.argv[1], sys.argv[2], sys.argv[3]
# The test names resolve to 127.0.0.2: loopback, refused unless a rule
# names it (DNS rebinding), so every rule set here names it.
LO = "127.0.0.2"
os.makedirs(os.path.join(T, "home"), exist_ok=True)
os.makedirs(os.path.join(T, "run"), mode=0o700, exist_ok=True)
ENV = dict(os.environ, HOME=os.path.join(T, "home"),
           XDG_RUNTIME_DIR=os.path.join(T, "run"),
           JUPYTER_AGENT_SERVE_SOCKET=os.path.join(T, "no-serve.sock"))
N = [0, 0]

# Runs in the box: other.test until it passes (at most 50 s).
WAIT = r'''
import time, urllib.request, urllib.error
n, t0, out = 0, time.time(), None
while time.time() - t0 < 50:
    try:
        out = urllib.request.urlopen('http://other.test:%s/echo',
                                     timeout=20).read().decode().strip()
        break
    except urllib.error.HTTPError as e:
        n += 1
        time.sleep(0.2)
print('passed after %%d refusals: %%s' %% (n, out) if out else
      'never passed (%%d refusals)' %% n)
''' % P
PASSED = re.compile(r"passed after ([1-9]\d*) refusals: plain host=other\.test")


def ok(cond, what, diag=None):
    N[0] += 1
    if not cond:
        N[1] += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", N[0], what))
    if not cond and diag is not None:
        for ln in str(diag)[-3000:].splitlines():
            print("# " + ln)
    sys.stdout.flush()


def start(argv, pattern):
    srv = subprocess.Popen([BIN] + argv, env=ENV, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = srv.stdout.readline()
        m = re.search(pattern, line)
        if m:
            threading.Thread(target=srv.stdout.read, daemon=True).start()
            return srv, int(m.group(1)) if m.groups() else 0
        if not line and srv.poll() is not None:
            break
    return srv, None


def stop(srv):
    srv.terminate()
    try:
        srv.wait(60)
    except subprocess.TimeoutExpired:
        srv.kill()


def http_call(port, method, path, body=None, headers=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=None if body is None else
                  (body if isinstance(body, bytes) else
                   json.dumps(body).encode()), headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def wait_refused(netlog, host="other.test", seconds=60):
    """Until --net-log shows the box refused `host`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            for ln in open(netlog):
                j = json.loads(ln)
                if j.get("host") == host and j.get("verdict") == "refused":
                    return True
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    return False


def net_records(audit):
    out = []
    for ln in open(audit):
        j = json.loads(ln)
        if j.get("type") == "net":
            out.append(j)
    return out


def children(pid):
    """Host pids of the processes whose parent is `pid`, with argv."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open("/proc/%s/stat" % d).read()
            ppid = int(st.rsplit(")", 1)[1].split()[1])
            cmd = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            kids.append((int(d), [c.decode(errors="replace") for c in cmd]))
    return kids


def fd_targets(pid):
    out = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                out.add(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
            except OSError:
                pass
    except OSError:
        pass
    return out


def unix_peers(inodes):
    """The peer inodes of these Unix sockets (from ss, if present)."""
    try:
        txt = subprocess.run(["ss", "-xan"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    peers = set()
    for ln in txt.splitlines():
        f = ln.split()
        if len(f) >= 8 and f[5] in inodes:
            peers.add(f[7])
    return peers


# Runs in the box: what it can reach of the proxy and the launcher.
ATTACK = r'''
import json, os, socket, urllib.request, urllib.error
res = {}
for name, pid in (("proxy", %(proxy)d), ("launcher", %(launcher)d)):
    try:
        os.kill(pid, 0)
        res[name] = "signal delivered"
    except ProcessLookupError:
        res[name] = "no such process"
    except PermissionError:
        res[name] = "permission denied"
links = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            for fd in os.listdir("/proc/%%s/fd" %% p):
                try:
                    links.append(os.readlink("/proc/%%s/fd/%%s" %% (p, fd)))
                except OSError:
                    pass
        except OSError:
            pass
res["links"] = sorted(set(links))
body = json.dumps({"allow_net": "other.test:%(P)s"}).encode()
target = "127.0.0.1:%(port)d"
try:  # a raw request to the proxy (NO_PROXY would skip it for 127.0.0.1)
    c = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    c.sendall(("PUT http://%%s/sessions/%(sid)s/network HTTP/1.1\r\n"
               "Host: %%s\r\nContent-Type: application/json\r\n"
               "Content-Length: %%d\r\n\r\n" %% (target, target, len(body))
               ).encode() + body)
    res["door_proxy"] = c.recv(4096).decode(errors="replace")[:400]
except Exception as e:
    res["door_proxy"] = "error " + type(e).__name__
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", %(port)d))
    res["door_direct"] = "connected"
except OSError as e:
    res["door_direct"] = "refused " + type(e).__name__
print("ATTACK " + json.dumps(res))
'''


def mcp_part():
    mlog, mnet = os.path.join(T, "m.audit"), os.path.join(T, "m.net")
    srv, port = start(["mcp", "--http", "127.0.0.1:0", "--allow-net",
                       "data.test:%s,%s" % (P, LO), "--net-log", mnet, "--audit", mlog],
                      rb"listening on http://127\.0\.0\.1:(\d+)/mcp")
    ok(port, "mcp --http --allow-net starts")
    if not port:
        return
    hdr = {"Accept": "application/json, text/event-stream"}
    st, h, _ = http_call(port, "POST", "/mcp", {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}}, hdr)
    sid = h.get("mcp-session-id", "")
    sh = dict(hdr, **{"MCP-Session-Id": sid,
                      "MCP-Protocol-Version": "2025-11-25"})

    def py(code, i):
        st, _, raw = http_call(port, "POST", "/mcp", {
            "jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "python", "arguments": {"code": code}}}, sh)
        try:
            res = json.loads(raw)["result"]
            return "".join(c.get("text", "") for c in res["content"])
        except (ValueError, KeyError, TypeError):
            return raw.decode(errors="replace")

    first = py("print(6 * 7)", 2)
    ok("42" in first, "an MCP session with --allow-net runs code", first)
    net = "/sessions/%s/network" % sid
    st, _, raw = http_call(port, "GET", net)
    ok(st == 200 and json.loads(raw).get("allow_net") == "data.test:%s,%s" % (P, LO),
       "GET %s shows the session's rules" % "/sessions/ID/network", raw)

    # The box against its own rules.
    kids = children(srv.pid)
    proxy = [k for k, cmd in kids if "__egress-proxy" in cmd]
    ok(len(proxy) == 1, "the session's proxy is a process of the server's",
       kids)
    proxy = proxy[0] if proxy else 0
    out = py(ATTACK % {"proxy": proxy, "launcher": srv.pid, "port": port,
                       "sid": sid, "P": P}, 3)
    m = re.search(r"ATTACK (\{.*\})", out)
    res = json.loads(m.group(1)) if m else {}
    ok(res.get("proxy") == "no such process" and
       res.get("launcher") == "no such process",
       "the box cannot signal the proxy or the launcher (not in its pid "
       "namespace)", out)
    ends = {t for t in fd_targets(proxy) if t.startswith(("socket:",
                                                          "pipe:"))}
    inodes = {t.split("[")[1].rstrip("]") for t in ends if "[" in t}
    ends |= {"socket:[%s]" % i for i in unix_peers(inodes)}
    seen = set(res.get("links", [])) & ends
    ok(m and len(ends) >= 3 and not seen,
       "no process in the box holds the rules socket, the record pipe or "
       "the proxy's listening ends (%d ends checked)" % len(ends),
       {"seen": sorted(seen), "ends": sorted(ends)})
    ok(res.get("door_proxy", "").startswith("HTTP/1.1 403") and
       "127.0.0.1" in res.get("door_proxy", ""),
       "the server's door through the proxy: 403 (loopback not named)", out)
    ok(res.get("door_direct", "").startswith("refused"),
       "the server's door directly: refused (the box's own loopback)", out)
    st, _, raw = http_call(port, "GET", net)
    ok(json.loads(raw).get("allow_net") == "data.test:%s,%s" % (P, LO),
       "after the attempts the rules are unchanged", raw)

    # The operator changes them while code runs.
    got = {}
    t = threading.Thread(target=lambda: got.update(out=py(WAIT, 4)))
    t.start()
    refused = wait_refused(mnet)
    st, _, raw = http_call(port, "PUT", net, {
        "allow_net": ["data.test:" + P, "other.test:" + P, LO]})
    t.join(90)
    ok(refused and st == 200, "the operator's PUT while code runs: 200", raw)
    ok(PASSED.search(got.get("out", "")),
       "mcp: running code refused other.test, then passed once the operator "
       "allowed it", got.get("out"))
    st, _, raw = http_call(port, "PUT", net, {"allow_net": "bad rule"})
    ok(st == 400 and b"is not a rule" in raw,
       "a malformed rule: 400 naming it, rules kept", raw)
    st, _, raw = http_call(port, "GET", net)
    ok(json.loads(raw).get("allow_net") ==
       "data.test:%s,other.test:%s,%s" % (P, P, LO), "GET shows the new rules", raw)
    st, _, raw = http_call(port, "PUT", "/sessions/%s/network" % ("0" * 32),
                           {"allow_net": ""})
    ok(st == 404, "another session id: 404", raw)
    http_call(port, "DELETE", "/mcp", headers={"MCP-Session-Id": sid})
    stop(srv)
    recs = net_records(mlog)
    ok(any(r.get("verdict") == "refused" and r.get("host") == "other.test"
           for r in recs) and
       any(r.get("verdict") == "allowed" and r.get("host") == "other.test" and
           r.get("rule") == "other.test:" + P and r.get("bytes_in", 0) > 0
           for r in recs) and all(r.get("session") for r in recs),
       "--audit has the proxy's records: refused, then allowed by the new "
       "rule, with bytes and the session id (%d net records)" % len(recs),
       recs[-4:])
    v = subprocess.run([BIN, "audit", "verify", mlog], env=ENV,
                       capture_output=True, text=True, timeout=60)
    ok(v.returncode == 0, "audit verify accepts the log with net records",
       v.stdout + v.stderr)
    ok(os.path.getsize(mnet) > 0 and
       all(json.loads(ln).get("event") == "net" for ln in open(mnet)),
       "--net-log still gets one JSON line a connection")


def e2b_part():
    srv, port = start(["e2b", "--listen", "127.0.0.1:0"],
                      rb"listening on http://127\.0\.0\.1:(\d+)")
    ok(port, "the E2B server starts")
    if not port:
        return
    key = {"X-API-KEY": "e2b_" + "0123456789abcdef" * 2 + "01234567"}
    st, _, raw = http_call(port, "POST", "/sandboxes", {
        "templateID": "code-interpreter-v1", "timeout": 120,
        "network": {"allowOut": ["data.test:" + P]}}, key)
    ok(st == 501 and b"0.0.0.0/0" in raw,
       "E2B create with allowOut but not 'deny all': 501 saying what to add",
       raw)
    st, _, raw = http_call(port, "POST", "/sandboxes", {
        "templateID": "code-interpreter-v1", "timeout": 120,
        "network": {"allowOut": ["data.test:" + P, LO],
                    "denyOut": ["0.0.0.0/0"]}}, key)
    box = json.loads(raw) if st == 201 else {}
    ok(st == 201, "E2B create with network.allowOut and denyOut 0.0.0.0/0",
       raw)
    if st != 201:
        stop(srv)
        return
    h = {"E2b-Sandbox-Id": box["sandboxID"], "E2b-Sandbox-Port": "49999",
         "X-Access-Token": box.get("envdAccessToken") or ""}
    got = {}

    def run():
        st, _, raw = http_call(port, "POST", "/execute", {"code": WAIT}, h)
        got["out"] = raw.decode(errors="replace")

    t = threading.Thread(target=run)
    t.start()
    net = "/sandboxes/%s/network" % box["sandboxID"]
    time.sleep(1.5)  # the code's first attempts are refused meanwhile
    st1, _, raw1 = http_call(port, "PUT", net, {
        "allowOut": ["data.test:" + P], "denyOut": ["0.0.0.0/0"],
        "rules": {"other.test": [{"transform": {"headers": {"A": "b"}}}]}},
        key)
    st2, _, raw2 = http_call(port, "PUT", net, {"allowOut": ["bad rule"],
                                                "denyOut": ["0.0.0.0/0"]},
                             key)
    st, _, raw = http_call(port, "PUT", net, {
        "allowOut": ["data.test:" + P, "other.test:" + P, LO],
        "denyOut": ["0.0.0.0/0"]}, key)
    t.join(90)
    ok(st1 == 501 and b"rules" in raw1,
       "PUT network with header transforms: 501", raw1)
    ok(st2 == 400 and b"is not a rule" in raw2,
       "PUT network with a malformed allowOut: 400 naming it", raw2)
    ok(st == 204, "PUT /sandboxes/ID/network: 204", raw)
    ok(PASSED.search(got.get("out", "")),
       "e2b: running code refused other.test, then passed after the PUT",
       got.get("out"))
    st, _, raw = http_call(port, "PUT", net, {"denyOut": ["0.0.0.0/0"]},
                           dict(key, **{"X-API-KEY": "e2b_" + "f" * 40}))
    ok(st in (401, 404), "another API key cannot change it (%d)" % st, raw)
    stop(srv)


def serve_part():
    sock = os.path.join(T, "run", "serve.sock")
    env = dict(ENV, JUPYTER_AGENT_SERVE_SOCKET=sock)
    snet = os.path.join(T, "s.net")
    srv = subprocess.Popen([BIN, "serve", "--pool", "1", "--no-factory",
                            "--allow-net", "data.test:%s,%s" % (P, LO),
                            "--net-log",
                            snet], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

    def status():
        r = subprocess.run([BIN, "serve", "--status"], env=env,
                           capture_output=True, text=True, timeout=30)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {}
    deadline = time.time() + 90
    while time.time() < deadline and status().get("ready", 0) < 1:
        time.sleep(0.3)
    ex = subprocess.Popen([BIN, "exec", "--warm", "pool", "--allow-net",
                           "data.test:%s,%s" % (P, LO), "-c", WAIT], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    refused = wait_refused(snet)
    boxes = status().get("network", [])
    pid = boxes[0]["pid"] if boxes else 0
    r = subprocess.run([BIN, "serve", "--set-net", "%d:data.test:%s,"
                        "other.test:%s,%s" % (pid, P, P, LO)], env=env,
                       capture_output=True, text=True, timeout=30)
    out, err = ex.communicate(timeout=90)
    ok(refused and pid and r.returncode == 0,
       "serve --set-net PID:RULES on a session in use", r.stdout + r.stderr)
    ok(PASSED.search(out), "serve: a warm session's running code passed "
       "once the operator allowed other.test", out + err)
    r = subprocess.run([BIN, "serve", "--set-net", "1:data.test"], env=env,
                       capture_output=True, text=True, timeout=30)
    ok(r.returncode != 0 and "no session" in r.stderr,
       "--set-net for a pid no session has: refused", r.stderr)
    subprocess.run([BIN, "serve", "--stop"], env=env, capture_output=True,
                   timeout=30)
    stop(srv)


for part in (mcp_part, e2b_part, serve_part):
    try:
        part()
    except Exception as e:  # a part's failure is a test failure, not a stop
        ok(False, "%s ran to its end" % part.__name__, repr(e))
print("1..%d" % N[0])
print("%d passed, %d failed" % (N[0] - N[1], N[1]))
sys.exit(1 if N[1] else 0)
