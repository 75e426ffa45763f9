"""--audit FILE end to end (docs/audit.md), with real sandboxed kernels:

- `exec --file IN --keep-workspace DIR --audit LOG --audit-key KEY`: the
  session's policy is recorded, the code's SHA-256 and text, the file in
  and the file out with the hashes of the real files, the session's end,
  and a seal by the archive key that `audit verify --pub` accepts;
- `run NOTEBOOK --audit LOG` appends to the same log: each cell's code
  hash, and the records after the last seal are reported unsealed;
- `mcp --http --audit LOG` with two sessions writes one log that verifies,
  each session's records under its own id, with the shell tool's command
  and write_file / read_file as files in and out; so does `e2b --audit`
  with two sandboxes, an upload and a download;
- `audit verify` names the record edited in a real log and exits 8;
- a FIFO or a symbolic link as --audit is refused before anything runs.
TAP.
"""
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("JUPYTER_AGENT_BIN", "build/jupyter-agent")
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


def sha(data):
    return hashlib.sha256(data).hexdigest()


def records(path):
    with open(path, "rb") as f:
        return [json.loads(line) for line in f.read().splitlines()]


T = tempfile.mkdtemp(prefix="ja-audit-")
os.chmod(T, 0o711)
RUN = os.path.join(T, "run")
os.makedirs(RUN, mode=0o711)
os.makedirs(os.path.join(T, "home"))
ENV = dict(os.environ, XDG_RUNTIME_DIR=RUN, HOME=os.path.join(T, "home"),
           JUPYTER_AGENT_SERVE_SOCKET=os.path.join(T, "no-serve.sock"))
LOG = os.path.join(T, "a.log")
KEY = os.path.join(T, "k")


def start_server(argv, pattern):
    """A server of ours: (process, its port from the line `pattern` matches
    on stderr, or None); the rest of its stderr is drained."""
    srv = subprocess.Popen([BIN] + argv, env=ENV, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = srv.stderr.readline()
        m = re.search(pattern, line)
        if m:
            threading.Thread(target=lambda: srv.stderr.read(),
                             daemon=True).start()
            return srv, int(m.group(1))
        if not line and srv.poll() is not None:
            break
    return srv, None


def stop_server(srv):
    srv.send_signal(signal.SIGTERM)
    try:
        srv.wait(60)
    except subprocess.TimeoutExpired:
        srv.kill()


def ja(*args, **kw):
    return subprocess.run([BIN] + list(args), env=ENV, capture_output=True,
                          timeout=kw.get("timeout", 180))


try:
    r = ja("manifest", "keygen", "-o", KEY)
    ok(r.returncode == 0, "an archive key made", r.stderr)

    # ---- exec: policy, code, files in and out, end, seal --------------
    data = b"one line of input\n"
    with open(os.path.join(T, "in.txt"), "wb") as f:
        f.write(data)
    keep = os.path.join(T, "keep")
    code = ("d = open('/mnt/data/in.txt').read()\n"
            "open('/mnt/data/out.txt', 'w').write(d * 2)\n"
            "print('copied', len(d))")
    r = ja("exec", "--audit", LOG, "--audit-key", KEY, "--memory", "1G",
           "--file", os.path.join(T, "in.txt"), "--keep-workspace", keep,
           "-c", code)
    ok(r.returncode == 0 and b"copied 18" in r.stdout,
       "exec --audit ran the code", r.stderr)
    ok(os.stat(LOG).st_mode & 0o777 == 0o600, "the log was made mode 0600")
    recs = records(LOG)
    sid = next((x["session"] for x in recs if x["type"] == "session_start"),
               None)
    start = next((x for x in recs if x["type"] == "session_start"), {})
    limits = start.get("policy", {}).get("limits", {})
    ok(limits.get("memory_bytes") == 1 << 30 and limits.get("engine") and
       "binds" in limits and limits.get("network") is False,
       "session_start holds the whole policy (memory, engine, mounts, "
       "network)", start)
    fin = [x for x in recs if x["type"] == "file_in"]
    ok(len(fin) == 1 and fin[0]["sha256"] == sha(data) and
       fin[0]["size"] == len(data) and fin[0]["name"] == "in.txt",
       "file_in: the --file with its size and the real file's SHA-256", fin)
    ex = [x for x in recs if x["type"] == "exec" and not x["silent"]]
    ok(len(ex) == 1 and ex[0]["code"] == code and
       ex[0]["code_sha256"] == sha(code.encode()) and
       ex[0]["code_bytes"] == len(code.encode()),
       "exec: the code's text and the SHA-256 of exactly what ran", ex)
    end = [x for x in recs if x["type"] == "exec_end" and
           ex and x["exec"] == ex[0]["exec"]]
    ok(len(end) == 1 and end[0]["status"] == "ok" and
       end[0]["outputs"].get("stdout", {}).get("count") == 1 and
       end[0]["outputs"]["stdout"]["bytes"] == len("copied 18\n"),
       "exec_end: status and output counts and bytes by kind", end)
    out_real = open(os.path.join(keep, "out.txt"), "rb").read()
    fout = [x for x in recs if x["type"] == "file_out" and
            x["name"] == "out.txt"]
    ok(len(fout) == 1 and fout[0]["sha256"] == sha(out_real) and
       fout[0]["size"] == len(out_real),
       "file_out: the --keep-workspace copy with the real file's SHA-256",
       [x for x in recs if x["type"] == "file_out"])
    types = [x["type"] for x in recs]
    ok(types[0] == "log" and "session_end" in types and
       types[-1] == "seal" and all(x["session"] in (None, sid)
                                   for x in recs),
       "the log starts with its own record and ends with the session's end "
       "and a seal", types)
    r = ja("audit", "verify", LOG, "--pub", KEY + ".pub")
    ok(r.returncode == 0 and b"verified" in r.stdout and
       b"through the last record" in r.stdout,
       "audit verify --pub: the chain and the seal hold", r.stdout + r.stderr)

    # ---- run: the same log continues, unsealed tail --------------------
    cells = ["x = 6 * 7", "print(x)"]
    nb = {"cells": [{"cell_type": "code", "execution_count": None,
                     "id": "c%d" % i, "metadata": {}, "outputs": [],
                     "source": c} for i, c in enumerate(cells)],
          "metadata": {"kernelspec": {"name": "python3",
                                      "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    with open(os.path.join(T, "nb.ipynb"), "w") as f:
        json.dump(nb, f)
    r = ja("run", os.path.join(T, "nb.ipynb"), "-o",
           os.path.join(T, "out.ipynb"), "--audit", LOG)
    ok(r.returncode == 0, "run --audit ran the notebook", r.stderr)
    recs = records(LOG)
    run_sid = recs[-1]["session"]
    run_ex = [x for x in recs if x["type"] == "exec" and
              x["session"] == run_sid and not x["silent"]]
    ok([x["code_sha256"] for x in run_ex] ==
       [sha(c.encode()) for c in cells] and run_sid != sid,
       "run: one exec record per cell with its source's SHA-256, under a "
       "new session id", run_ex)
    r = ja("audit", "verify", LOG, "--pub", KEY + ".pub")
    ok(r.returncode == 0 and b"2 sessions" in r.stdout and
       b"UNSEALED" in r.stdout,
       "audit verify: both sessions; the run's records after the seal are "
       "reported unsealed", r.stdout + r.stderr)

    # ---- audit verify catches an edit in the real log -------------------
    lines = open(LOG, "rb").read().splitlines(keepends=True)
    at = next(i for i, l in enumerate(lines)
              if b'"type":"exec"' in l and b"copied" in l)
    bad = os.path.join(T, "bad.log")
    lines[at] = lines[at].replace(b"print('copied'", b"print('COPIED'")
    with open(bad, "wb") as f:
        f.writelines(lines)
    r = ja("audit", "verify", bad)
    ok(r.returncode == 8 and
       ("line %d " % (at + 1)).encode() in r.stderr and b"edited" in r.stderr,
       "audit verify names the edited record (line %d) and exits 8" %
       (at + 1), (r.returncode, r.stderr))

    # ---- refusals --------------------------------------------------------
    fifo = os.path.join(T, "fifo")
    os.mkfifo(fifo)
    r = ja("exec", "--audit", fifo, "-c", "print(1)", timeout=30)
    ok(r.returncode == 2 and b"FIFO" in r.stderr and b"1\n" not in r.stdout,
       "a FIFO as --audit is refused before anything runs", r.stderr)
    os.symlink(LOG, os.path.join(T, "link"))
    r = ja("exec", "--audit", os.path.join(T, "link"), "-c", "print(1)",
           timeout=30)
    ok(r.returncode == 2 and b"symbolic link" in r.stderr,
       "a symbolic link as --audit is refused", r.stderr)

    # ---- mcp --http: two sessions, one log -------------------------------
    mlog = os.path.join(T, "m.log")
    srv, port = start_server(["mcp", "--http", "127.0.0.1:0", "--audit",
                              mlog],
                             rb"listening on http://127\.0\.0\.1:(\d+)/mcp")

    def post(body, headers=None):
        h = {"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}
        h.update(headers or {})
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            c.request("POST", "/mcp", body=json.dumps(body).encode(),
                      headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, \
                r.read()
        finally:
            c.close()

    ran = []
    SHELL = "echo shell-said-hi"
    shell_ran = files_ran = False
    WROTE = "written through MCP\n"
    if port:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25",
                           "capabilities": {},
                           "clientInfo": {"name": "audit", "version": "0"}}}
        for i in range(2):
            st, h, _ = post(init)
            s = h.get("mcp-session-id")
            pyc = "print(%d * 7)" % (i + 5)
            st2, _, raw = post({"jsonrpc": "2.0", "id": 2,
                                "method": "tools/call",
                                "params": {"name": "python",
                                           "arguments": {"code": pyc}}},
                               {"MCP-Session-Id": s,
                                "MCP-Protocol-Version": "2025-11-25"})
            ran.append((st, st2, str((i + 5) * 7).encode() in raw, pyc, s))
            if i == 0:
                st3, _, raw3 = post(
                    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "shell",
                                "arguments": {"command": SHELL}}},
                    {"MCP-Session-Id": s,
                     "MCP-Protocol-Version": "2025-11-25"})
                shell_ran = st3 == 200 and b"shell-said-hi" in raw3
                hdr = {"MCP-Session-Id": s,
                       "MCP-Protocol-Version": "2025-11-25"}
                st4, _, raw4 = post(
                    {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": "write_file",
                                "arguments": {"path": "/mnt/data/w.txt",
                                              "content": WROTE}}}, hdr)
                st5, _, raw5 = post(
                    {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                     "params": {"name": "read_file",
                                "arguments": {"path": "/mnt/data/w.txt"}}},
                    hdr)
                files_ran = st4 == 200 and st5 == 200 and \
                    WROTE.strip().encode() in raw5
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("DELETE", "/mcp", headers={"MCP-Session-Id": s})
            c.getresponse().read()
            c.close()
    stop_server(srv)
    ok(port and len(ran) == 2 and all(x[0] == 200 and x[1] == 200 and x[2]
                                      for x in ran),
       "mcp --http --audit: two sessions ran code", ran)
    r = ja("audit", "verify", mlog)
    ok(r.returncode == 0 and b"2 sessions" in r.stdout,
       "the server's one log for both sessions verifies",
       r.stdout + r.stderr)
    recs = records(mlog) if os.path.exists(mlog) else []
    per = {}
    for x in recs:
        if x["session"]:
            per.setdefault(x["session"], []).append(x)
    codes = sorted(x["code_sha256"] for v in per.values() for x in v
                   if x["type"] == "exec" and not x["silent"])
    ok(len(per) == 2 and codes == sorted(sha(x[3].encode()) for x in ran)
       and all(any(x["type"] == "session_end" for x in v)
               for v in per.values()),
       "each session's start, code and end are under its own id", per.keys())
    cmd = [x for x in recs if x["type"] == "command"]
    cend = [x for x in recs if x["type"] == "command_end"]
    ok(shell_ran and len(cmd) == 1 and
       cmd[0]["code_sha256"] == sha(("/bin/sh -c " + SHELL).encode()) and
       len(cend) == 1 and cend[0]["exit_code"] == 0 and
       cend[0]["output_bytes"] == len("shell-said-hi\n"),
       "the MCP shell tool's command is recorded with its hash, exit code "
       "and output bytes", (shell_ran, cmd, cend))
    fi = [x for x in recs if x["type"] == "file_in" and
          x["via"] == "mcp write_file"]
    fo = [x for x in recs if x["type"] == "file_out" and
          x["via"] == "mcp read_file"]
    ok(files_ran and len(fi) == 1 and len(fo) == 1 and
       fi[0]["sha256"] == fo[0]["sha256"] == sha(WROTE.encode()) and
       fi[0]["size"] == len(WROTE),
       "MCP write_file and read_file are recorded as files in and out with "
       "the content's SHA-256", (files_ran, fi, fo))

    # ---- e2b: two sandboxes, one log; uploads and downloads ------------
    elog = os.path.join(T, "e.log")
    srv, eport = start_server(["e2b", "--listen", "127.0.0.1:0", "--audit",
                               elog],
                              rb"listening on http://127\.0\.0\.1:(\d+)")
    UP = b"uploaded through E2B\n"
    got = []
    if eport:
        key = {"X-API-KEY": "e2b_" + "0123456789abcdef" * 2 + "01234567"}
        for i in range(2):
            c = http.client.HTTPConnection("127.0.0.1", eport, timeout=120)
            c.request("POST", "/sandboxes", body=json.dumps(
                {"templateID": "code-interpreter-v1", "timeout": 60}),
                headers=dict(key, **{"Content-Type": "application/json"}))
            box = json.loads(c.getresponse().read())
            c.close()
            h = {"E2b-Sandbox-Id": box["sandboxID"],
                 "E2b-Sandbox-Port": "49983",
                 "X-Access-Token": box.get("envdAccessToken") or ""}
            if i == 0:
                c = http.client.HTTPConnection("127.0.0.1", eport, timeout=60)
                c.request("POST", "/files?path=/home/user/up.txt", body=UP,
                          headers=dict(h, **{"Content-Type":
                                             "application/octet-stream"}))
                c.getresponse().read()
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", eport, timeout=60)
                c.request("GET", "/files?path=/home/user/up.txt", headers=h)
                got.append(c.getresponse().read())
                c.close()
    stop_server(srv)
    r = ja("audit", "verify", elog)
    ok(got == [UP] and r.returncode == 0 and b"2 sessions" in r.stdout,
       "e2b --audit: two sandboxes write one log that verifies",
       (got, r.stdout + r.stderr))
    recs = records(elog) if os.path.exists(elog) else []
    ef = [(x["type"], x["via"], x["sha256"], x["size"]) for x in recs
          if x["type"] in ("file_in", "file_out")]
    ok(ef == [("file_in", "e2b upload", sha(UP), len(UP)),
              ("file_out", "e2b download", sha(UP), len(UP))],
       "an E2B upload and download are files in and out with the content's "
       "SHA-256", ef)
finally:
    shutil.rmtree(T, ignore_errors=True)

print("1..%d" % N)
sys.exit(1 if FAILED else 0)
