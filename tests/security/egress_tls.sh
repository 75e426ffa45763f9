#!/bin/sh
# TAP: --net-secret and --net-ca (docs/egress.md), loopback only. In a
# private mount namespace a temporary /etc/hosts maps api.test, open.test,
# wrong.test, bad.test and plainsecret.test to 127.0.0.2, where an HTTPS
# server with a certificate from this test's own CA (passed by --net-ca),
# one with a self-signed certificate and a plain HTTP server listen. The
# servers say whether the secret arrived, never what it is. One box runs
# curl, requests, urllib, certifi and pip's requests against them and then
# searches itself for the secret; a kernel (exec) does the same.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tap.sh"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null ||
    ! command -v openssl >/dev/null || ! command -v curl >/dev/null; then
    echo "1..0 # SKIP needs root, unshare, openssl and curl"
    exit 0
fi
if [ -z "$EGRESS_PRIVATE_NS" ]; then # a mount namespace of our own
    EGRESS_PRIVATE_NS=1 exec unshare -m -- sh "$0" "$@"
fi
mount --make-rprivate /
T=$(mktemp -d /tmp/ja-egress-tls-XXXXXX)
chmod 755 "$T"
SRV=
trap '[ -n "$SRV" ] && kill $SRV; rm -rf "$T"' EXIT
export HOME="$T/home"
unset XDG_RUNTIME_DIR SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE
mkdir -p "$HOME"
printf '127.0.0.1 localhost\n127.0.0.2 api.test open.test wrong.test bad.test plainsecret.test\n' >"$T/hosts"
mount --bind "$T/hosts" /etc/hosts

# The test's CA, a server certificate it signs (api.test, open.test; not
# wrong.test), and a self-signed one for bad.test.
EC="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
# shellcheck disable=SC2086
openssl req -x509 $EC -keyout "$T/ca.key" -out "$T/ca.pem" -days 1 \
    -subj /CN=egress-tls-test-CA -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign 2>/dev/null
# shellcheck disable=SC2086
openssl req $EC -keyout "$T/srv.key" -out "$T/srv.csr" -subj /CN=api.test 2>/dev/null
printf 'subjectAltName=DNS:api.test,DNS:open.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$T/srv.ext"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" \
    -CAcreateserial -out "$T/srv.pem" -days 1 -extfile "$T/srv.ext" 2>/dev/null
# shellcheck disable=SC2086
openssl req -x509 $EC -keyout "$T/bad.key" -out "$T/bad.pem" -days 1 \
    -subj /CN=bad.test -addext subjectAltName=DNS:bad.test 2>/dev/null
# The secrets: random, in files only the launcher reads (0600, root).
S1="Bearer ja-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
S2="key-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
umask 077
printf '%s\n' "$S1" >"$T/s1"
printf '%s\n' "$S2" >"$T/s2"
umask 022
# What the box gets to search with: the two halves, in hex.
HALF=$((${#S1} / 2))
HA=$(printf '%s' "$S1" | head -c $HALF | od -An -tx1 | tr -d ' \n')
HB=$(printf '%s' "$S1" | tail -c +$((HALF + 1)) | od -An -tx1 | tr -d ' \n')
cp "$HERE/egress_tls_box.py" "$T/box.py"
chmod 644 "$T/box.py"
"$PY" "$HERE/egress_tls_servers.py" "$T/ports" "$T/srv.pem" "$T/srv.key" \
    "$T/bad.pem" "$T/bad.key" "$T/s1" "$T/s2" 2>"$T/srv.err" &
SRV=$!
i=0
while [ ! -s "$T/ports" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
read -r S B P <"$T/ports" || { echo "Bail out! servers did not start"; cat "$T/srv.err"; exit 1; }

line() { grep "^$1: " "$T/out" | head -1; }
has() { line "$1" | grep -qF -- "$2"; }

timeout -k 5 180 "$BIN" sandbox --quiet \
    --allow-net "api.test:$S,open.test:$S,wrong.test:$S,bad.test:$B,api.test:$P,plainsecret.test:$P,127.0.0.2" \
    --net-secret "api.test:Authorization=@$T/s1" \
    --net-secret "wrong.test:Authorization=@$T/s1" \
    --net-secret "bad.test:Authorization=@$T/s1" \
    --net-secret "http://plainsecret.test:X-Api-Key=@$T/s2" \
    --net-ca "$T/ca.pem" --net-log "$T/net.jsonl" \
    --bind "$T/box.py:/opt/box.py" \
    -- "$PY" /opt/box.py "$S" "$B" "$P" "$HA" "$HB" >"$T/out" 2>"$T/err" </dev/null
rc=$?
[ "$rc" = 0 ]
ok $? "a box with --net-secret runs (exit $rc)"
{ [ "$rc" = 0 ] && [ -z "$EGRESS_DEBUG" ]; } || diag "$T/out" "$T/err" "$T/net.jsonl"

has curl "tls auth=ok auths=1"
ok $? "curl in the box reaches the secret host; the server sees the header"
authed=$(line requests | grep -o 'auth=ok auths=1' | wc -l)
has requests "n=4 body=0" && has requests "n=2 body=5009" && has requests "n=3 body=7000" && [ "$authed" = 4 ]
ok $? "requests: 4 requests on one kept-alive connection (a Content-Length body, a chunked body) all carry the header"
has requests "n=1 body=0"
ok $? "the header the box sent itself is replaced, not added to (one Authorization)"
has urllib "tls auth=ok"
ok $? "urllib with Python's default trust (SSL_CERT_FILE) accepts the session CA"
has certifi "tls auth=ok"
ok $? "certifi.where() in the box holds the session CA (the system bundle)"
has pip_requests "tls auth=ok"
ok $? "pip's vendored requests with PIP_CERT accepts it"
has leaf_secret_host "issuer=jupyter-agent egress session CA" && has leaf_secret_host "alpn=http/1.1"
ok $? "for the secret host the box sees a leaf of the session CA; ALPN gives http/1.1 when h2 is offered"
has leaf_open_host "issuer=egress-tls-test-CA"
ok $? "a host without a secret is not intercepted: the box sees the server's own certificate (no leaf minted)"
has sni_mismatch "error" && ! has sni_mismatch "issuer="
ok $? "a ClientHello whose SNI is not the CONNECT host gets no certificate"
has trace "status=405" && ! has trace "auth="
ok $? "TRACE to a secret host is refused (405): it would echo the secret"
has bad_cert "response 502"
ok $? "an upstream with a self-signed certificate: curl's CONNECT gets 502"
has bad_cert_requests "502" && has bad_cert_requests "is not trusted: self-signed certificate" && has bad_cert_requests "nothing was sent"
ok $? "requests shows the 502's reason: the upstream certificate is not trusted (self-signed)"
has wrong_name "502" && has wrong_name "not trusted: hostname mismatch"
ok $? "an upstream whose certificate names another host: 502 (hostname mismatch)"
has plain_refused "status=403" && has plain_refused "sent over HTTPS only"
ok $? "plain HTTP to a secret host is refused (403): the secret goes over HTTPS only"
has plain_secret "plain auth=ok auths=0 keys=1"
ok $? "a secret given as http://HOST reaches a plain HTTP upstream"
has host_mismatch "status=403" && ! has host_mismatch "auth="
ok $? "inside TLS a Host other than the CONNECT host is refused (403)"
has env "clean"
ok $? "the secret is not in the box's environment"
has proc "clean" && ! has proc "clean 0 "
ok $? "the secret is in no process's environ, cmdline or memory in the box ($(line proc | cut -d' ' -f3-))"
has self_mem "clean"
ok $? "the secret is not in the memory of the process that made the requests ($(line self_mem | cut -d' ' -f3-4))"
has files "clean"
ok $? "the secret is in no readable file outside /usr ($(line files | cut -d' ' -f3-4))"
has keys "none"
ok $? "no private key (the CA's or the leaves') is readable in the box"
has control "found"
ok $? "the search finds the secret where it is (a control process holding it)"
has ca_text "Permitted:" && has ca_text "DNS:api.test" && ! has ca_text "DNS:open.test" && has ca_text "CA:TRUE"
ok $? "the session CA is name-constrained to the secret hosts"
! grep -qF -- "${S1#Bearer }" "$T/net.jsonl" "$T/err" "$T/out" && ! grep -qF -- "$S2" "$T/net.jsonl" "$T/err" "$T/out"
ok $? "the secret is in neither the net log, nor the box's output"
grep '"host":"api.test"' "$T/net.jsonl" | grep -q 'TLS terminated.*requests with Authorization added' &&
    ! grep '"host":"open.test"' "$T/net.jsonl" | grep -q 'TLS terminated'
ok $? "the net log says which connections were terminated, and open.test's was not"
! pgrep -f -- "__egress-proxy api.test:$S," >/dev/null
ok $? "the proxy ends with the box"

# A real kernel: the requests, then a search of its own memory.
timeout -k 5 180 "$BIN" exec --allow-net "api.test:$S,127.0.0.2" \
    --net-secret "api.test:Authorization=@$T/s1" --net-ca "$T/ca.pem" \
    --bind "$T/box.py:/opt/box.py" -c "
import requests, sys
print('kernel_req:', requests.get('https://api.test:$S/k').text.strip())
sys.argv = ['box', '$S', '$B', '$P', '$HA', '$HB', 'scan']
exec(open('/opt/box.py').read())
" >"$T/out" 2>"$T/err" </dev/null
krc=$?
has kernel_req "tls auth=ok auths=1"
ok $? "a sandboxed kernel (exec) reaches the secret host with the header (exit $krc)"
[ $? = 0 ] || diag "$T/out" "$T/err"
has self_mem "clean"
ok $? "the secret is not in the kernel process's memory ($(line self_mem | cut -d' ' -f3-4))"
has proc "clean" && has files "clean" && has env "clean" && has control "found"
ok $? "nor in the kernel box's files, environment or processes (control found)"

# Usage errors.
"$BIN" sandbox --quiet --net-secret "api.test:Host=@$T/s1" -- /bin/true 2>"$T/err"
[ $? = 2 ] && grep -q "cannot be a secret's header" "$T/err"
ok $? "a framing header (Host) cannot be a secret"
"$BIN" sandbox --quiet --allow-net other.test --net-secret "api.test:Authorization=@$T/s1" -- /bin/true 2>"$T/err"
[ $? = 2 ] && grep -q "no --allow-net rule allows api.test" "$T/err"
ok $? "a secret for a host no rule allows is a usage error"
done_testing
