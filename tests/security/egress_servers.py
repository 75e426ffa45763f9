"""Servers for tests/security/egress.sh, on loopback only: HTTP and HTTPS
on 127.0.0.2 (data.test), HTTP on 127.0.0.3 (rebind.test). Writes
"HTTP HTTPS REBIND UDP HOLD" ports to argv[2] when listening; serves argv[1].
Each response names the server and echoes the Host it was sent."""
import http.server
import os
import socket
import ssl
import sys
import threading

root, portfile, cert, key = sys.argv[1:5]
os.chdir(root)


class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.startswith('/echo'):
            body = ('%s host=%s path=%s\n' % (self.server.name,
                    self.headers.get('Host'), self.path)).encode()
            self.send_response(200)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


def serve(addr, name, tls=False):
    s = http.server.ThreadingHTTPServer((addr, 0), H)
    s.name = name
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s.server_address[1]


def udp_sink():
    # Anything that arrives is written down: nothing may.
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(('127.0.0.2', 0))

    def loop():
        while True:
            data, peer = u.recvfrom(2048)
            with open(portfile + '.udp', 'ab') as f:
                f.write(data + b'\n')
    threading.Thread(target=loop, daemon=True).start()
    return u.getsockname()[1]


def tcp_hold():
    # Connections complete in the kernel's backlog and are never served:
    # what the connection-cap check holds open.
    t = socket.socket()
    t.bind(('127.0.0.2', 0))
    t.listen(128)
    tcp_hold.sock = t
    return t.getsockname()[1]


ports = [serve('127.0.0.2', 'plain'), serve('127.0.0.2', 'tls', True),
         serve('127.0.0.3', 'rebind'), udp_sink(), tcp_hold()]
with open(portfile + '.tmp', 'w') as f:
    f.write(' '.join(map(str, ports)) + '\n')
os.rename(portfile + '.tmp', portfile)
threading.Event().wait()
