"""curl's error text can quote the server: a TLS certificate's subject
name reaches the message "certificate subject name '...' does not match"
(issue 24 item 14). A gateway whose certificate (signed by the CA we were
told to trust, so verification gets as far as the name) carries OSC 0 /
clear-screen sequences in its CN must not reach the user's terminal raw.
"""
import datetime
import http.server
import os
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_tap import BIN, done, ok, private_env  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

T, ENV = private_env("ja-curl-text-")
key = ec.generate_private_key(ec.SECP256R1())
name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                     "x\x1b]0;pwned\x07\x1b[2Jy")])
now = datetime.datetime.now(datetime.timezone.utc)
cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                       critical=True)
        .sign(key, hashes.SHA256()))
crt, pem = os.path.join(T, "cert.pem"), os.path.join(T, "key.pem")
with open(crt, "wb") as f:
    f.write(cert.public_bytes(serialization.Encoding.PEM))
with open(pem, "wb") as f:
    f.write(key.private_bytes(serialization.Encoding.PEM,
                              serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(crt, pem)
srv = http.server.HTTPServer(("127.0.0.1", 0),
                             http.server.BaseHTTPRequestHandler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
threading.Thread(target=srv.serve_forever, daemon=True).start()

p = subprocess.run([BIN, "exec", "--gateway",
                    "https://127.0.0.1:%d" % srv.server_port,
                    "--gateway-ca", crt, "-c", "print(1)"],
                   env=ENV, capture_output=True, timeout=120)
ok(p.returncode == 3 and b"certificate subject name" in p.stderr,
   "gateway: a certificate whose name does not match is refused with curl's "
   "reason (exit 3)", (p.returncode, p.stderr[:400]))
ok(b"\x1b" not in p.stderr and b"\x07" not in p.stderr
   and b"\\e]0;pwned" in p.stderr,
   "gateway: the server's certificate name in curl's text is printed escaped",
   repr(p.stderr[:400]))
srv.shutdown()
done(T)
