"""egress: HTTPS through the --allow-net proxy vs direct, on loopback.

The proxy is the real one (`jupyter-agent __egress-proxy RULES`, fd 3 its
listening Unix socket, fd 4 its life pipe), reached the way the box's relay
reaches it: a Unix socket, CONNECT, then TLS end to end. The upstream is a
Python HTTPS server on 127.0.0.1 with a throw-away certificate (openssl).

Figures: request latency p50/p99 with a new connection per request (TCP or
CONNECT, TLS handshake, GET, close: what pip and urllib do), the same on
one kept-alive connection, and bulk MB/s of one large GET. The proxy's
added latency is proxy p50 - direct p50. The "+ header" rows are the same
through a proxy with a --net-secret for the server's name (localhost):
TLS terminated at the proxy with a session leaf, the header added to each
request, TLS again upstream (what --net-secret costs over a plain tunnel).

    BENCH_EGRESS_N (300, QUICK 60)   requests per latency row
    BENCH_EGRESS_MB (256, QUICK 64)  size of the bulk GET
"""

import fcntl
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import percentile as pct  # noqa: E402

QUICK = bool(os.environ.get("QUICK"))
N = int(os.environ.get("BENCH_EGRESS_N", "60" if QUICK else "300"))
MB = int(os.environ.get("BENCH_EGRESS_MB", "64" if QUICK else "256"))
BIN = os.path.join(os.environ.get("BUILD", "build"), "jupyter-agent")
CHUNK = b"x" * (1 << 20)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path.startswith("/bulk"):
            self.send_response(200)
            self.send_header("Content-Length", str(MB << 20))
            self.end_headers()
            for _ in range(MB):
                self.wfile.write(CHUNK)
            return
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def serve(tmp):
    key, crt = os.path.join(tmp, "key.pem"), os.path.join(tmp, "crt.pem")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
            "-out", crt, "-days", "1", "-subj", "/CN=bench", "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, crt


def tls_conf(tmp, upstream_ca):
    """What the launcher hands the proxy for --net-secret (sandbox/
    sb_egress_secret.h): a leaf for localhost from a bench CA, its key,
    the header, and the upstream's certificate as --net-ca."""
    j = lambda n: os.path.join(tmp, n)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", j("ca.key"), "-out", j("ca.pem"),
            "-days", "1", "-subj", "/CN=bench session CA")
    openssl("req", *ec, "-keyout", j("leaf.key"), "-out", j("leaf.csr"),
            "-subj", "/CN=localhost")
    with open(j("leaf.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost\n")
    openssl("x509", "-req", "-in", j("leaf.csr"), "-CA", j("ca.pem"),
            "-CAkey", j("ca.key"), "-CAcreateserial", "-out", j("leaf.pem"),
            "-days", "1", "-extfile", j("leaf.ext"))
    rd = lambda n: open(j(n), "rb").read()  # noqa: E731
    recs = [(b"key", rd("leaf.key")), (b"upca", open(upstream_ca, "rb").read()),
            (b"host", b"localhost"), (b"header", b"Authorization"),
            (b"plain", b"0"), (b"value", b"Bearer bench-secret"),
            (b"chain", rd("leaf.pem") + rd("ca.pem"))]
    data = b"".join(b"%s %d\n%s\n" % (t, len(v), v) for t, v in recs)
    fd = os.memfd_create("bench-egress-tls")
    os.write(fd, data)
    return fd, j("ca.pem")


def start_proxy(tmp, port, conf_fd=None, host="127.0.0.1"):
    path = os.path.join(tmp, "egress%s.sock" % ("-tls" if conf_fd else ""))
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    os.chmod(path, 0o666)
    ls.listen(64)
    life_r, life_w = os.pipe()

    # the shell puts them at 3 and 4 (subprocess closes what is not passed)
    # a small exec stub puts them at 3 and 4 (subprocess closes the rest)
    a, b = fcntl.fcntl(ls.fileno(), fcntl.F_DUPFD, 10), fcntl.fcntl(
        life_r, fcntl.F_DUPFD, 10)
    c = fcntl.fcntl(conf_fd, fcntl.F_DUPFD, 10) if conf_fd else None
    stub = ("import os, sys; os.dup2(%d, 3); os.dup2(%d, 4); os.close(%d); "
            "os.close(%d); " % (a, b, a, b))
    if c:
        stub += "os.dup2(%d, 7); os.close(%d); " % (c, c)
    stub += "os.execv(sys.argv[1], sys.argv[1:])"
    rules = "%s:%d,127.0.0.1" % (host, port)
    p = subprocess.Popen([sys.executable, "-c", stub, BIN, "__egress-proxy",
                          rules], pass_fds=(a, b) + ((c,) if c else ()))
    os.close(a)
    os.close(b)
    if c:
        os.close(c)
    os.close(life_r)
    ls.close()
    return p, life_w, path


def dial(port, proxy, host=b"127.0.0.1"):
    if not proxy:
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(proxy)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
              % (host, port, host, port))
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise RuntimeError("proxy closed: %r" % head)
        head += b
    if b" 200 " not in head.split(b"\r\n")[0]:
        raise RuntimeError("proxy refused: %r" % head)
    return s


def get(tls, path, host=b"127.0.0.1"):
    tls.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host))
    f = tls.makefile("rb")
    line = f.readline()
    length = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        if h.lower().startswith(b"content-length:"):
            length = int(h.split(b":")[1])
    got = 0
    while got < length:
        b = f.read(min(1 << 20, length - got))
        if not b:
            break
        got += len(b)
    f.close()
    return line, got


def latency(ctx, port, proxy, fresh, host=None):
    out, tls = [], None
    h = host.encode() if host else b"127.0.0.1"
    for _ in range(N):
        t = time.perf_counter()
        if tls is None:
            tls = ctx.wrap_socket(dial(port, proxy, h), server_hostname=host)
        get(tls, b"/small", h + (b":%d" % port if host else b""))
        if fresh:
            tls.close()
            tls = None
        out.append((time.perf_counter() - t) * 1000)
    if tls:
        tls.close()
    return out


def bulk(ctx, port, proxy, host=None):
    best = 0.0
    h = host.encode() if host else b"127.0.0.1"
    for _ in range(3):
        tls = ctx.wrap_socket(dial(port, proxy, h), server_hostname=host)
        t = time.perf_counter()
        _, got = get(tls, b"/bulk", h + (b":%d" % port if host else b""))
        dt = time.perf_counter() - t
        tls.close()
        best = max(best, got / dt / 1e6)
    return best


def main():
    tmp = tempfile.mkdtemp(prefix="ja-egress-bench.")
    srv, crt = serve(tmp)
    port = srv.server_address[1]
    proc, life_w, sock = start_proxy(tmp, port)
    conf_fd, session_ca = tls_conf(tmp, crt)
    tproc, tlife_w, tsock = start_proxy(tmp, port, conf_fd, "localhost")
    ctx = ssl.create_default_context(cafile=crt)
    ctx.check_hostname = False
    tctx = ssl.create_default_context(cafile=session_ca)
    rows = {}
    try:
        for fresh, label in ((True, "new connection"), (False, "kept alive")):
            # interleaved halves, so drift hits both alike
            d1 = latency(ctx, port, None, fresh)
            p1 = latency(ctx, port, sock, fresh)
            t1 = latency(tctx, port, tsock, fresh, "localhost")
            d2 = latency(ctx, port, None, fresh)
            p2 = latency(ctx, port, sock, fresh)
            t2 = latency(tctx, port, tsock, fresh, "localhost")
            rows[label] = (d1 + d2, p1 + p2)
            rows[label + " + header"] = (d1 + d2, t1 + t2)
        mb_direct = bulk(ctx, port, None)
        mb_proxy = bulk(ctx, port, sock)
        mb_tls = bulk(tctx, port, tsock, "localhost")
    finally:
        os.close(life_w)
        os.close(tlife_w)
        proc.wait(timeout=10)
        tproc.wait(timeout=10)
        srv.shutdown()
    print("egress proxy vs direct, HTTPS on loopback (%d requests a row)"
          % (2 * N))
    print("%-25s %10s %10s %10s %10s %12s" % (
        "request", "direct p50", "proxy p50", "direct p99", "proxy p99",
        "added p50"))
    res = {"bench": "egress", "n": 2 * N, "bulk_mb": MB}
    for label, (d, p) in rows.items():
        dp50, pp50, dp99, pp99 = pct(d, 50), pct(p, 50), pct(d, 99), pct(p, 99)
        print("%-25s %8.3f ms %8.3f ms %8.3f ms %8.3f ms %9.3f ms" % (
            label, dp50, pp50, dp99, pp99, pp50 - dp50))
        key = label.replace(" + ", "_").replace(" ", "_")
        res[key] = {"direct_p50_ms": dp50, "proxy_p50_ms": pp50,
                    "direct_p99_ms": dp99, "proxy_p99_ms": pp99,
                    "added_p50_ms": pp50 - dp50}
    print("bulk GET of %d MiB: direct %.0f MB/s, proxy %.0f MB/s (%.0f%%)"
          % (MB, mb_direct, mb_proxy, 100 * mb_proxy / mb_direct))
    print("bulk GET + header (TLS terminated): %.0f MB/s (%.0f%% of direct)"
          % (mb_tls, 100 * mb_tls / mb_direct))
    res["bulk"] = {"direct_mb_s": mb_direct, "proxy_mb_s": mb_proxy,
                   "ratio": mb_proxy / mb_direct, "header_mb_s": mb_tls,
                   "header_ratio": mb_tls / mb_direct}
    print("targets: added p50 <= 1 ms, bulk >= 80% of direct")
    out = os.environ.get("BENCH_RESULTS")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
