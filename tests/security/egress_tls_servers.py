"""Servers for tests/security/egress_tls.sh, on 127.0.0.2 only: HTTPS with
a certificate from the test's own CA (api.test, open.test), HTTPS with a
self-signed one (bad.test), and plain HTTP. argv: portfile cert key
badcert badkey secret1file secret2file. Writes "HTTPS BAD HTTP" ports.

A response never echoes a header value: it says whether the secret
arrived (auth=ok), how many Authorization/X-Api-Key headers came, the
request's number on its connection (keep-alive) and the body's length."""
import http.server
import os
import ssl
import sys
import threading

portfile, cert, key, badcert, badkey, s1f, s2f = sys.argv[1:8]
S1 = open(s1f).read().strip()
S2 = open(s2f).read().strip()


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def body(self):
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            n = 0
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b''):
                        pass
                    return n
                n += len(self.rfile.read(size))
                self.rfile.readline()
        return len(self.rfile.read(int(self.headers.get('Content-Length',
                                                        '0'))))

    def answer(self):
        self.count = getattr(self, 'count', 0) + 1
        n = self.body()
        auths = self.headers.get_all('Authorization') or []
        keys = self.headers.get_all('X-Api-Key') or []
        ok = (auths == [S1]) or (keys == [S2])
        text = ('%s auth=%s auths=%d keys=%d n=%d body=%d host=%s\n' % (
            self.server.name, 'ok' if ok else 'missing', len(auths),
            len(keys), self.count, n, self.headers.get('Host')))
        b = text.encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    do_GET = do_POST = do_PUT = answer


def serve(name, tls=None):
    s = http.server.ThreadingHTTPServer(('127.0.0.2', 0), H)
    s.daemon_threads = True
    s.name = name
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        ctx.set_alpn_protocols(['h2', 'http/1.1'])
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s.server_address[1]


ports = [serve('tls', (cert, key)), serve('bad', (badcert, badkey)),
         serve('plain')]
with open(portfile + '.tmp', 'w') as f:
    f.write(' '.join(map(str, ports)) + '\n')
os.rename(portfile + '.tmp', portfile)
threading.Event().wait()
