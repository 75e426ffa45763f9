#!/bin/sh
# TAP: --allow-net, network by name (docs/egress.md). Loopback only: in a
# private mount namespace a temporary /etc/hosts maps data.test and
# other.test to 127.0.0.2 and rebind.test to 127.0.0.3, where HTTP, HTTPS
# (a throwaway CA the box is told to trust) and a UDP sink listen. One box
# runs every check from urllib, requests and curl; nothing resolves or
# reaches a real name.
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
T=$(mktemp -d /tmp/ja-egress-test-XXXXXX)
chmod 755 "$T"
SRV=
trap '[ -n "$SRV" ] && kill $SRV; rm -rf "$T"' EXIT
export HOME="$T/home"
unset XDG_RUNTIME_DIR
mkdir -p "$HOME" "$T/www"
printf '127.0.0.1 localhost\n127.0.0.2 data.test other.test\n127.0.0.3 rebind.test\n' >"$T/hosts"
mount --bind "$T/hosts" /etc/hosts
echo "hello from data.test" >"$T/www/hello.txt"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" \
    -out "$T/ca.pem" -days 1 -subj /CN=data.test \
    -addext "subjectAltName=DNS:data.test,DNS:other.test" 2>/dev/null
chmod 644 "$T/ca.pem" "$HERE/egress_box.py" 2>/dev/null
cp "$HERE/egress_box.py" "$T/egress_box.py"
"$PY" "$HERE/egress_servers.py" "$T/www" "$T/ports" "$T/ca.pem" \
    "$T/key.pem" 2>"$T/srv.err" &
SRV=$!
i=0
while [ ! -s "$T/ports" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
read -r P S R U K <"$T/ports" || { echo "Bail out! servers did not start"; cat "$T/srv.err"; exit 1; }

run() {
    timeout -k 5 120 "$BIN" sandbox --quiet "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
}
line() { grep "^$1: " "$T/out" | head -1; }
has() { line "$1" | grep -qF -- "$2"; }

export SSL_CERT_FILE=/opt/egress-ca.pem REQUESTS_CA_BUNDLE=/opt/egress-ca.pem
export CURL_CA_BUNDLE=/opt/egress-ca.pem
BOX_SH="echo \"curl_https: \$(curl -sS --max-time 20 https://data.test:$S/echo 2>&1)\"
echo \"curl_http: \$(curl -sS --max-time 20 http://data.test:$P/echo 2>&1)\"
echo \"curl_refused: \$(curl -sS --max-time 20 http://other.test:$P/echo 2>&1)\"
echo \"curl_noproxy: \$(curl -sS --noproxy '*' --max-time 5 http://data.test:$P/echo 2>&1)\"
$PY /opt/egress_box.py $P $S $R $U $K"
run --allow-net "data.test:$P,data.test:$S,rebind.test:$R,data.test:$K,127.0.0.2" \
    --net-log "$T/net.jsonl" --bind "$T/ca.pem:/opt/egress-ca.pem" \
    --bind "$T/egress_box.py:/opt/egress_box.py" \
    --env SSL_CERT_FILE --env REQUESTS_CA_BUNDLE --env CURL_CA_BUNDLE \
    -- /bin/sh -c "$BOX_SH"
[ "$rc" = 0 ]
ok $? "a box with --allow-net runs (exit $rc)"
{ [ "$rc" = 0 ] && [ -z "$EGRESS_DEBUG" ]; } || diag "$T/out" "$T/err" "$T/net.jsonl"

has urllib_http "ok plain host=data.test:$P"
ok $? "urllib reaches an allowed name over HTTP, Host intact"
has urllib_https "ok tls host=data.test:$S"
ok $? "urllib reaches an allowed name over HTTPS (CONNECT, the box's CA)"
has urllib_file "ok hello from data.test"
ok $? "a file downloads from an allowed name"
has requests "ok tls host=data.test:$S/echo" || has requests "ok tls host=data.test:$S path=/echo | plain"
ok $? "requests reaches an allowed name over HTTPS and HTTP"
has curl_https "tls host=data.test:$S"
ok $? "curl reaches an allowed name over HTTPS"
has curl_http "plain host=data.test:$P"
ok $? "curl reaches an allowed name over HTTP"
has unlisted_http "ok 403 jupyter-agent egress: refused GET other.test: other.test port $P is not on the --allow-net list; to allow it, add --allow-net other.test:$P"
ok $? "a name not on the list: HTTP 403 naming the rule that would allow it"
has unlisted_https "403" && has unlisted_https "add --allow-net other.test:$S"
ok $? "a name not on the list over HTTPS: the CONNECT 403 says which rule"
has curl_refused "add --allow-net other.test:$P"
ok $? "curl shows the refusal and the rule"
has ip_literal "ok 403" && has ip_literal "no rule names the IP address 127.0.0.2 on port $P" && has ip_literal "add --allow-net 127.0.0.2:$P"
ok $? "an IP literal no rule names on that port is refused"
has rebind "ok 403" && has rebind "rebind.test resolves to 127.0.0.3, a loopback address" && has rebind "add --allow-net 127.0.0.3"
ok $? "an allowed name resolving to an unnamed loopback address is refused (DNS rebinding)"
has sni_mismatch "refused" && ! has sni_mismatch "handshake passed"
ok $? "a CONNECT whose TLS SNI differs from its host is cut before the handshake"
has host_mismatch "ok HTTP/1.1 403" && has host_mismatch "Host header 'other.test' is not the request's target"
ok $? "a plain request whose Host differs from its target: 403"
has raw_tcp_loopback "refused PermissionError" || has raw_tcp_loopback "refused ConnectionRefusedError"
ok $? "a raw TCP connect to another loopback port is refused"
has raw_tcp_server "refused"
ok $? "a raw TCP connect to the server's own address is refused (no route out)"
[ ! -s "$T/ports.udp" ]
ok $? "a UDP datagram from the box never reaches the host's sink"
has dns_public "refused gaierror"
ok $? "DNS from the box fails: it never resolves anything"
capn=$(line conn_cap | sed -n 's/.*first refusal at connection \([0-9]*\): HTTP\/1.1 503 .*/\1/p')
[ -n "$capn" ] && [ "$capn" -ge 28 ] && [ "$capn" -le 33 ] && has conn_cap "32 connections are open, the session's cap"
ok $? "past 32 connections at once: 503 naming the cap (at connection $capn)"
[ -n "$capn" ] || line conn_cap | sed 's/^/# /'

has curl_noproxy "Failed" || has curl_noproxy "Could not resolve" || has curl_noproxy "Permission denied"
ok $? "curl with the proxy turned off reaches nothing"
[ "$(grep -c '"verdict":"allowed"' "$T/net.jsonl" 2>/dev/null || echo 0)" -ge 6 ] &&
    grep '"verdict":"refused"' "$T/net.jsonl" | grep -q '"host":"rebind.test".*"address":"127.0.0.3"' &&
    grep '"verdict":"allowed"' "$T/net.jsonl" | grep -q "\"rule\":\"data.test:$S\".*\"bytes_down\":[1-9]"
ok $? "--net-log records each connection: verdict, host, address, rule, bytes"
grep -q '"sni":"other.test"' "$T/net.jsonl"
ok $? "the SNI refusal is recorded with the SNI it carried"
[ $? = 0 ] || diag "$T/net.jsonl"
! pgrep -f -- "__egress-proxy" >/dev/null
ok $? "the proxy ends with the box"

# The kernel path: a real IPython kernel gets the same way out.
timeout -k 5 120 "$BIN" exec --allow-net "data.test:$P,127.0.0.2" -c \
    "import urllib.request; print(urllib.request.urlopen('http://data.test:$P/echo', timeout=20).read().decode())" \
    >"$T/kout" 2>"$T/kerr" </dev/null
krc=$?
grep -q "plain host=data.test:$P" "$T/kout"
ok $? "a sandboxed kernel (exec) reaches an allowed name (exit $krc)"
[ $? = 0 ] || diag "$T/kout" "$T/kerr"

# Without --allow-net nothing changes.
run -- /bin/sh -c 'env | grep -ci proxy; grep -c ":0C38 " /proc/net/tcp; ls '"$T"'/../ 2>/dev/null | head -0'
[ "$(head -1 "$T/out")" = 0 ] && [ "$(sed -n 2p "$T/out")" = 0 ]
ok $? "without --allow-net: no proxy variables, no port 3128 in the box"
run --allow-net "bad rule" -- /bin/true
[ "$rc" = 2 ] && grep -q "is not a rule" "$T/err"
ok $? "a malformed rule is a usage error naming it"
done_testing
