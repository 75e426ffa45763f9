"""Runs inside the box for tests/security/egress_tls.sh (and, as
`scan_only`, inside a kernel). Prints one "name: result" line per check.

argv: HTTPS BAD HTTP A B [scan_only]: the servers' ports, then the secret's
two halves in hex. The full secret is never written in this file, its
argv or its memory: a hit is a place where half A is followed by half B.
"""
import os
import socket
import ssl
import subprocess
import sys
import urllib.request

S, B, P = (int(x) for x in sys.argv[1:4])
HA, HB = bytes.fromhex(sys.argv[4]), bytes.fromhex(sys.argv[5])
SCAN_ONLY = len(sys.argv) > 6


def say(name, what):
    print('%s: %s' % (name, str(what).replace('\n', ' | ')), flush=True)


def attempt(name, fn):
    try:
        say(name, fn())
    except Exception as e:  # the refusal is the result
        say(name, 'error %s %s' % (type(e).__name__, e))


def holds(buf):
    i = buf.find(HA)
    while i >= 0:
        if buf[i + len(HA):i + len(HA) + len(HB)] == HB:
            return True
        i = buf.find(HA, i + 1)
    return False


def scan_files():
    hits, keys, n = [], [], 0
    for top in ('/',):
        for d, dirs, files in os.walk(top):
            if d == '/':
                dirs[:] = [x for x in dirs if x not in ('proc', 'sys', 'usr')]
            for f in files:
                path = os.path.join(d, f)
                try:
                    if not os.path.isfile(path) or os.path.islink(path):
                        continue
                    with open(path, 'rb') as fh:
                        data = fh.read(64 << 20)
                except OSError:
                    continue
                n += 1
                if holds(data):
                    hits.append(path)
                if b'PRIVATE' + b' KEY-----' in data:
                    keys.append(path)
    return n, hits, keys


def scan_mem(pid):
    """Every readable mapping of `pid`: (bytes read, found)."""
    total = 0
    with open('/proc/%s/maps' % pid) as m:
        maps = m.read().splitlines()
    with open('/proc/%s/mem' % pid, 'rb', 0) as mem:
        for line in maps:
            f = line.split()
            if 'r' not in f[1] or (len(f) > 5 and f[5] in ('[vvar]',
                                                           '[vsyscall]')):
                continue
            lo, hi = (int(x, 16) for x in f[0].split('-'))
            at, tail = lo, b''
            while at < hi:
                try:
                    mem.seek(at)
                    chunk = mem.read(min(1 << 20, hi - at))
                except (OSError, ValueError, OverflowError):
                    break
                if not chunk:
                    break
                total += len(chunk)
                if holds(tail + chunk):
                    return total, True
                tail = chunk[-(len(HA) + len(HB)):]
                at += len(chunk)
    return total, False


def scan_all():
    env = [k for k, v in os.environ.items() if holds((k + v).encode())]
    say('env', 'clean' if not env else 'LEAK %s' % env)
    procs, found, unread = 0, [], 0
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        for part in ('environ', 'cmdline'):
            try:
                with open('/proc/%s/%s' % (pid, part), 'rb') as fh:
                    if holds(fh.read()):
                        found.append('%s/%s' % (pid, part))
            except OSError:
                pass
        try:
            n, hit = scan_mem(pid)
            procs += 1
            if hit:
                found.append('%s/mem' % pid)
        except OSError:
            unread += 1
    say('proc', 'clean %d processes (%d unreadable)' % (procs, unread)
        if not found else 'LEAK %s' % found)
    n, mine = scan_mem('self')
    say('self_mem', '%s %d MB' % ('LEAK' if mine else 'clean', n >> 20))
    n, hits, keys = scan_files()
    say('files', 'clean %d files' % n if not hits else 'LEAK %s' % hits)
    say('keys', 'none' if not keys else 'readable %s' % keys)
    # The scanner finds the secret where it is: a child holding it.
    child = subprocess.Popen(
        [sys.executable, '-c', 'import sys,time; s=bytes.fromhex(sys.argv[1])'
         '+bytes.fromhex(sys.argv[2]); print(1, flush=True); time.sleep(60)',
         HA.hex(), HB.hex()], stdout=subprocess.PIPE)
    child.stdout.readline()
    try:
        say('control', 'found' if scan_mem(child.pid)[1] else 'missed')
    finally:
        child.kill()


api = 'https://api.test:%d' % S


def curl(*args):
    return subprocess.run(['curl', '-sS', '--max-time', '20', '-w',
                           ' status=%{http_code}'] + list(args),
                          capture_output=True, text=True, timeout=30)


def peer(host, sni=None, alpn=None):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n'
              % (host.encode(), S))
    head = b''
    while b'\r\n\r\n' not in head:
        head += s.recv(1)
    if b' 200 ' not in head.split(b'\r\n')[0]:
        return 'refused %s' % head.split(b'\r\n')[0].decode()
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    if alpn:
        ctx.set_alpn_protocols(alpn)
    t = ctx.wrap_socket(s, server_hostname=sni or host)
    issuer = dict(x[0] for x in t.getpeercert()['issuer'])
    proto = t.selected_alpn_protocol()
    t.close()
    return 'issuer=%s alpn=%s' % (issuer.get('commonName'), proto)


def main():
    r = curl(api + '/auth')
    say('curl', r.stdout + r.stderr)


    def session():
        import requests
        with requests.Session() as s:
            out = [s.get(api + '/a', headers={'Authorization': 'Bearer guess'}
                         ).text.strip(),
                   s.post(api + '/b', json={'x': 'y' * 5000}).text.strip(),
                   s.post(api + '/c', data=(b'z' * 1000 for _ in range(7))
                          ).text.strip(),
                   s.put(api + '/d', data=b'').text.strip()]
        return ' ; '.join(out)


    attempt('requests', session)
    attempt('urllib', lambda: urllib.request.urlopen(api + '/u', timeout=20)
            .read().decode())


    def certifi_ctx():
        import certifi
        ctx = ssl.create_default_context(cafile=certifi.where())
        return urllib.request.urlopen(api + '/c', timeout=20, context=ctx
                                      ).read().decode()


    attempt('certifi', certifi_ctx)


    def pip_requests():
        from pip._vendor import requests as preq
        return preq.get(api + '/pip', verify=os.environ['PIP_CERT'],
                        timeout=20).text


    attempt('pip_requests', pip_requests)
    attempt('leaf_secret_host', lambda: peer('api.test', alpn=['h2',
                                                               'http/1.1']))
    attempt('leaf_open_host', lambda: peer('open.test'))
    attempt('sni_mismatch', lambda: peer('api.test', sni='open.test'))
    r = curl('-X', 'TRACE', api + '/t')
    say('trace', r.stdout + r.stderr)
    r = curl('https://bad.test:%d/x' % B)
    say('bad_cert', r.stdout + r.stderr)
    attempt('bad_cert_requests', lambda: __import__('requests').get(
        'https://bad.test:%d/x' % B, timeout=20).text)
    attempt('wrong_name', lambda: __import__('requests').get(
        'https://wrong.test:%d/x' % S, timeout=20).text)
    r = curl('http://api.test:%d/x' % P)
    say('plain_refused', r.stdout + r.stderr)
    r = curl('http://plainsecret.test:%d/x' % P)
    say('plain_secret', r.stdout + r.stderr)
    r = curl('-H', 'Host: open.test', api + '/h')
    say('host_mismatch', r.stdout + r.stderr)
    scan_all()
    ca_text()


def ca_text():
    pem = open(os.environ['SSL_CERT_FILE']).read()
    last = pem[pem.rindex('-----BEGIN CERTIFICATE-----'):]
    r = subprocess.run(['openssl', 'x509', '-noout', '-text'], input=last,
                       capture_output=True, text=True)
    say('ca_text', r.stdout + r.stderr)


if SCAN_ONLY:
    scan_all()
else:
    main()
