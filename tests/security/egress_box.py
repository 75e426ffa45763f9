"""Run inside a box with --allow-net (tests/security/egress.sh): one line
"name: result" per check, result "ok ..." or "refused ..." or "error ...".
argv: HTTP HTTPS REBIND UDP HOLD ports."""
import os
import socket
import ssl
import sys
import time
import urllib.request

P, S, R, U, K = sys.argv[1:6]


def check(name, fn):
    t0 = time.time()
    try:
        print('%s: ok %s' % (name, fn()), flush=True)
    except Exception as e:  # what the user's code would see
        print('%s: refused %s: %s' % (name, type(e).__name__,
              str(e).replace('\n', ' ')[:400]), flush=True)
    print('# %s took %.2f s' % (name, time.time() - t0), flush=True)


def get(url):
    with urllib.request.urlopen(url, timeout=20) as r:
        return r.read().decode().strip()


def body_of_refusal(url):
    try:
        urllib.request.urlopen(url, timeout=20)
        return 'not refused'
    except urllib.error.HTTPError as e:
        return '%d %s' % (e.code, e.read().decode().strip())


check('urllib_http', lambda: get('http://data.test:%s/echo' % P))
check('urllib_https', lambda: get('https://data.test:%s/echo' % S))
check('urllib_file', lambda: get('http://data.test:%s/hello.txt' % P))


def req():
    import requests
    r = requests.get('https://data.test:%s/echo' % S, timeout=20)
    r2 = requests.get('http://data.test:%s/echo' % P, timeout=20)
    return r.text.strip() + ' | ' + r2.text.strip()


check('requests', req)
check('unlisted_http', lambda: body_of_refusal('http://other.test:%s/echo' % P))
check('unlisted_https', lambda: get('https://other.test:%s/echo' % S))
check('ip_literal', lambda: body_of_refusal('http://127.0.0.2:%s/echo' % P))
check('rebind', lambda: body_of_refusal('http://rebind.test:%s/echo' % R))


def sni_mismatch():
    # CONNECT data.test, then a ClientHello naming other.test.
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'CONNECT data.test:%s HTTP/1.1\r\nHost: data.test:%s\r\n\r\n'
              % (S.encode(), S.encode()))
    head = s.recv(4096)
    ctx = ssl.create_default_context()
    t = ctx.wrap_socket(s, server_hostname='other.test')
    return 'handshake passed: ' + head.decode().split('\r\n')[0] + str(t)


check('sni_mismatch', sni_mismatch)


def host_mismatch():
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'GET http://data.test:%s/echo HTTP/1.1\r\nHost: other.test\r\n'
              b'\r\n' % P.encode())
    return s.recv(4096).decode().split('\r\n')[0]


check('host_mismatch', host_mismatch)


def direct(addr, port):
    def f():
        socket.create_connection((addr, int(port)), timeout=5).close()
        return 'connected to %s:%s' % (addr, port)
    return f


check('raw_tcp_loopback', direct('127.0.0.1', 8080))
check('raw_tcp_server', direct('127.0.0.2', P))


def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(3)
    u.sendto(b'from-the-box', ('127.0.0.2', int(U)))
    return 'sent'


check('udp', udp)
check('dns_public', lambda: socket.getaddrinfo('example.org', 80)[0][4][0])


def conn_cap():
    # 32 connections at once are the session's cap: holding connections
    # open, the first 503 comes at the 33rd at the latest (a connection an
    # earlier check left may still be ending: it counts too).
    held = []
    try:
        for i in range(40):
            s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
            held.append(s)
            s.sendall(b'CONNECT data.test:%s HTTP/1.1\r\n\r\n' % K.encode())
            line = s.recv(4096).decode().split('\r\n')[0]
            if not line.startswith('HTTP/1.1 200'):
                return 'first refusal at connection %d: %s' % (i + 1, line)
        return 'no refusal after 40'
    finally:
        for s in held:
            s.close()


check('conn_cap', conn_cap)
