#!/bin/sh
# TAP: --allow-net rules changed by the operator on running sessions
# (mcp --http, the E2B server, serve), proxy records in --audit, and the
# box's attempts to change its own rules: see egress_live.py. Loopback
# only, as egress.sh: a private mount namespace maps data.test and
# other.test to 127.0.0.2, where egress_servers.py serves HTTP.
BIN=${JUPYTER_AGENT_BIN:-build/jupyter-agent}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null ||
    ! command -v openssl >/dev/null; then
    echo "1..0 # SKIP needs root, unshare and openssl"
    exit 0
fi
if [ -z "$EGRESS_PRIVATE_NS" ]; then # a mount namespace of our own
    EGRESS_PRIVATE_NS=1 exec unshare -m -- sh "$0" "$@"
fi
mount --make-rprivate /
T=$(mktemp -d /tmp/ja-egress-live-XXXXXX)
chmod 755 "$T"
SRV=
trap '[ -n "$SRV" ] && kill $SRV; rm -rf "$T"' EXIT
mkdir -p "$T/www"
printf '127.0.0.1 localhost\n127.0.0.2 data.test other.test\n127.0.0.3 rebind.test\n' >"$T/hosts"
mount --bind "$T/hosts" /etc/hosts
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" \
    -out "$T/ca.pem" -days 1 -subj /CN=data.test 2>/dev/null
"$PY" "$HERE/egress_servers.py" "$T/www" "$T/ports" "$T/ca.pem" \
    "$T/key.pem" 2>"$T/srv.err" &
SRV=$!
i=0
while [ ! -s "$T/ports" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
read -r P _ <"$T/ports" || { echo "Bail out! servers did not start"; cat "$T/srv.err"; exit 1; }
"$PY" "$HERE/egress_live.py" "$BIN" "$T" "$P"
