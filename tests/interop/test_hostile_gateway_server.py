"""The hostile gateway (tests/gateway/hostile_gateway.py) misbehaves the way
tests/security/hostile_gateway.sh says it does: checked here with
tornado's own WebSocket client, raw sockets where a client library would
refuse to look, and jupyter_server's own v1 deserializer for the baseline.
A mode that quietly behaved would make the security test pass for nothing.
"""
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest
import tornado.httpclient
import tornado.websocket

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "gateway", "hostile_gateway.py")
V1 = "v1.kernel.websocket.jupyter.org"
TOKEN = "t0k3n-" + uuid.uuid4().hex
MIB = 1024 * 1024


class Gateway:
    def __init__(self, mode, protocol="v1"):
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, "--mode", mode, "--token", TOKEN,
             "--protocol", protocol, "--lifetime", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.port = int(self.proc.stdout.readline())
        self.base = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.kill()
        _, err = self.proc.communicate()
        return err.decode()


@pytest.fixture
def gateway():
    made = []

    def start(mode, protocol="v1"):
        g = Gateway(mode, protocol)
        made.append(g)
        return g
    yield start
    for g in made:
        g.stop()


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def rest(g, method, path, body=None, token=TOKEN, timeout=20):
    client = tornado.httpclient.AsyncHTTPClient()
    return await client.fetch(
        g.base + path, method=method, raise_error=False,
        body=None if body is None else json.dumps(body),
        headers={"Authorization": "token " + token} if token else {},
        request_timeout=timeout)


async def start_kernel(g):
    r = await rest(g, "POST", "/api/kernels", {"name": "python3"})
    assert r.code == 201, r.body
    return json.loads(r.body)["id"]


async def connect(g, kid, protocols=(V1,)):
    req = tornado.httpclient.HTTPRequest(
        "ws://127.0.0.1:%d/api/kernels/%s/channels" % (g.port, kid),
        headers={"Authorization": "token " + TOKEN})
    return await tornado.websocket.websocket_connect(
        req, subprotocols=list(protocols), max_message_size=64 * MIB)


def execute_request(code="print('hello')"):
    header = {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request",
              "username": "test", "session": uuid.uuid4().hex,
              "date": "2026-01-01T00:00:00Z", "version": "5.3"}
    return {"header": header, "parent_header": {}, "metadata": {},
            "content": {"code": code, "silent": False}, "channel": "shell"}


def v1_encode(m):
    from jupyter_server.base.zmqhandlers import serialize_msg_to_ws_v1
    return serialize_msg_to_ws_v1(
        [json.dumps(m[k]).encode() for k in
         ("header", "parent_header", "metadata", "content")], m["channel"])


def v1_decode(frame):
    """jupyter_server's own reader, then JSON."""
    from jupyter_server.base.zmqhandlers import deserialize_msg_from_ws_v1
    channel, parts = deserialize_msg_from_ws_v1(frame)
    keys = ("header", "parent_header", "metadata", "content")
    return dict(zip(keys, (json.loads(p) for p in parts[:4])), channel=channel)


def offsets(frame):
    n = int.from_bytes(frame[:8], "little")
    return n, [int.from_bytes(frame[8 * (i + 1):8 * (i + 2)], "little")
               for i in range(min(n, 64))]


async def exec_and_collect(g, seconds=3.0, protocols=(V1,), limit=None):
    """Send one execute_request; return (msg_id, frames, closed)."""
    kid = await start_kernel(g)
    ws = await connect(g, kid, protocols)
    req = execute_request()
    ws.write_message(v1_encode(req) if ws.selected_subprotocol == V1
                     else json.dumps(req), binary=ws.selected_subprotocol == V1)
    frames, closed = [], False
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (limit is None or len(frames) < limit):
        try:
            f = await asyncio.wait_for(ws.read_message(),
                                       deadline - time.monotonic())
        except asyncio.TimeoutError:
            break
        if f is None:
            closed = True
            break
        frames.append(f)
    ws.close()
    return req["header"]["msg_id"], frames, closed


def test_normal_mode_speaks_the_real_v1_protocol(gateway):
    g = gateway("normal")
    msg_id, frames, _ = run(exec_and_collect(g, limit=5))
    msgs = [v1_decode(f) for f in frames]
    assert all(m["parent_header"]["msg_id"] == msg_id for m in msgs)
    assert [m["header"]["msg_type"] for m in msgs] == [
        "status", "execute_input", "stream", "execute_reply", "status"]
    assert msgs[2]["content"]["text"] == "hello\n"
    assert msgs[3]["channel"] == "shell" and msgs[4]["content"][
        "execution_state"] == "idle"


def test_normal_mode_speaks_legacy_json_when_asked(gateway):
    g = gateway("normal", protocol="legacy")
    msg_id, frames, _ = run(exec_and_collect(g, limit=5))
    msgs = [json.loads(f) for f in frames]
    assert all(isinstance(f, str) for f in frames)
    assert [m["header"]["msg_type"] for m in msgs][-2:] == [
        "execute_reply", "status"]
    assert all(m["parent_header"]["msg_id"] == msg_id for m in msgs)


def test_a_wrong_token_is_refused(gateway):
    g = gateway("normal")
    assert run(rest(g, "GET", "/api/kernelspecs", token="wrong")).code == 403
    assert run(rest(g, "GET", "/api/kernelspecs")).code == 200


def test_http_403_carries_egs_resource_limit_message(gateway):
    g = gateway("http-403")
    r = run(rest(g, "POST", "/api/kernels", {"name": "python3"}))
    assert r.code == 403
    assert "max kernels per user limit" in json.loads(r.body)["message"]


def test_slowloris_never_finishes_its_answer(gateway):
    g = gateway("slowloris")
    with socket.create_connection(("127.0.0.1", g.port)) as s:
        body = b'{"name": "python3"}'
        s.sendall(b"POST /api/kernels HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: token " + TOKEN.encode() +
                  b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.settimeout(4)
        got = b""
        end = time.monotonic() + 4
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    assert b"201" in head.split(b"\r\n")[0]
    assert b"Content-Length: 1048576" in head
    assert 0 < len(body) < 10  # a byte a second, never the promised MiB


def test_ws_hang_never_answers_the_handshake(gateway):
    g = gateway("ws-hang")

    async def go():
        kid = await start_kernel(g)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(connect(g, kid), 3)
    run(go())


async def hung_up(g, kid, times):
    """The next `times` handshakes each end without an answer."""
    for _ in range(times):
        with pytest.raises((tornado.websocket.WebSocketClosedError,
                            tornado.iostream.StreamClosedError,
                            tornado.httpclient.HTTPClientError)):
            await asyncio.wait_for(connect(g, kid), 10)


def test_ws_hang_once_holds_the_first_handshake_then_answers(gateway):
    g = gateway("ws-hang-once")

    async def go():
        kid = await start_kernel(g)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(connect(g, kid), 3)
        ws = await asyncio.wait_for(connect(g, kid), 10)
        ws.close()
    run(go())


def test_ws_drop_hangs_up_twice_then_answers(gateway):
    g = gateway("ws-drop")

    async def go():
        kid = await start_kernel(g)
        await hung_up(g, kid, 2)
        ws = await asyncio.wait_for(connect(g, kid), 10)
        ws.close()
    run(go())


def test_ws_drop_dead_always_hangs_up_and_reports_dead(gateway):
    g = gateway("ws-drop-dead")

    async def go():
        kid = await start_kernel(g)
        await hung_up(g, kid, 3)
        r = await rest(g, "GET", "/api/kernels/" + kid)
        assert r.code == 200
        assert json.loads(r.body)["execution_state"] == "dead"
    run(go())


def raw_frames(g, kid, request, timeout=60):
    """Speak WebSocket by hand (a client library would refuse the big
    frames before we could look): send `request` as one masked frame, then
    read the server's frames until EOF. Yields (announced length, bytes
    received, first 4 KiB, last 4 KiB) per frame, keeping no more."""
    with socket.create_connection(("127.0.0.1", g.port)) as s:
        s.sendall(("GET /api/kernels/%s/channels HTTP/1.1\r\nHost: x\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Protocol: %s\r\n"
                   "Authorization: token %s\r\n\r\n" % (kid, V1, TOKEN)).encode())
        assert len(request) < 65536
        mask = b"\x01\x02\x03\x04"
        s.sendall(b"\x82" + bytes([0x80 | 126]) + len(request).to_bytes(2, "big")
                  + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(request)))
        s.settimeout(timeout)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(4096)
        head, _, buf = buf.partition(b"\r\n\r\n")
        assert b" 101 " in head.split(b"\r\n")[0] and V1.encode() in head

        def fill(n):
            nonlocal buf
            while len(buf) < n:
                chunk = s.recv(1 << 20)
                if not chunk:
                    return False
                buf += chunk
            return True
        while fill(2):
            ln, need = buf[1] & 0x7F, 2
            if ln >= 126:
                need = 4 if ln == 126 else 10
                if not fill(need):
                    return
                ln = int.from_bytes(buf[2:need], "big")
            buf = buf[need:]
            got, first, last = 0, b"", b""
            while got < ln:
                if not buf and not fill(1):
                    break
                take = buf[:ln - got]
                buf = buf[len(take):]
                got += len(take)
                if len(first) < 4096:
                    first += take[:4096 - len(first)]
                last = (last + take)[-4096:]
            yield ln, got, first, last
            if got < ln:
                return


def test_oversized_frame_announces_1_gib_and_sends_600_mib(gateway):
    g = gateway("oversized-frame")
    kid = run(start_kernel(g))
    frames = list(raw_frames(g, kid, v1_encode(execute_request())))
    announced, received, _, _ = frames[-1]
    assert announced == 1 << 30
    assert received == 600 * MIB


def test_oversized_message_is_one_complete_300_mib_message(gateway):
    g = gateway("oversized-message")
    kid = run(start_kernel(g))
    big = None
    for f in raw_frames(g, kid, v1_encode(execute_request())):
        if f[0] > MIB:
            big = f
            break  # the server keeps the socket open after it
    assert big and big[0] > 300 * MIB
    announced, received, first, last = big
    assert received == announced  # complete
    n, offs = offsets(first)
    assert n == 6 and offs[-1] == announced  # a consistent offset table
    assert first[offs[0]:offs[1]] == b"iopub"
    assert first[offs[4]:].startswith(b'{"name": "stdout", "text": "aaaa')
    assert last.endswith(b'aaaa"}')
    assert announced - offs[4] > 300 * MIB  # the content alone


@pytest.mark.parametrize("mode,broken", [
    ("offsets-past-end", lambda n, o, size: o[n - 1] > size),
    ("offsets-decreasing", lambda n, o, size: o[1] < o[0]),
    ("offsets-huge-count", lambda n, o, size: n == 1 << 60),
])
def test_malformed_v1_offset_tables(gateway, mode, broken):
    g = gateway(mode)
    _, frames, _ = run(exec_and_collect(g, limit=4))
    bad = [f for f in frames if broken(*offsets(f), len(f))]
    assert len(bad) == 1, "mode %s sent no malformed frame" % mode
    good = [f for f in frames if f is not bad[0]]
    assert all(v1_decode(f) for f in good)  # only the one frame is broken


def test_wrong_channel_names(gateway):
    g = gateway("wrong-channel")
    _, frames, _ = run(exec_and_collect(g, limit=4))
    channels = {v1_decode(f)["channel"] for f in frames}
    assert channels and not channels & {"shell", "iopub", "stdin", "control"}


def test_flood_never_ends_and_never_replies(gateway):
    g = gateway("flood")
    msg_id, frames, closed = run(exec_and_collect(g, seconds=10, limit=3000))
    msgs = [v1_decode(f) for f in frames]
    assert not closed and len(msgs) == 3000
    assert all(m["parent_header"]["msg_id"] == msg_id for m in msgs)
    assert "execute_reply" not in {m["header"]["msg_type"] for m in msgs}


def test_never_idle_replies_then_stays_busy(gateway):
    g = gateway("never-idle")
    _, frames, _ = run(exec_and_collect(g, seconds=2))
    msgs = [v1_decode(f) for f in frames]
    types = [m["header"]["msg_type"] for m in msgs]
    assert "execute_reply" in types and len(msgs) > 10
    states = [m["content"]["execution_state"] for m in msgs
              if m["header"]["msg_type"] == "status"]
    assert "idle" not in states


def test_invalid_json_header(gateway):
    g = gateway("invalid-json")
    _, frames, _ = run(exec_and_collect(g, limit=4))
    from jupyter_server.base.zmqhandlers import deserialize_msg_from_ws_v1
    bad = 0
    for f in frames:
        _, parts = deserialize_msg_from_ws_v1(f)
        try:
            json.loads(parts[0])
        except ValueError:
            bad += 1
    assert bad == 1


def test_forged_parent_ids(gateway):
    g = gateway("forged-parent")
    msg_id, frames, _ = run(exec_and_collect(g, limit=6))
    msgs = [v1_decode(f) for f in frames]
    assert len(msgs) == 6
    assert all(m["parent_header"]["msg_id"] != msg_id for m in msgs)
    assert any(m["content"].get("text") == "FORGED\n" for m in msgs)


def test_ws_close_mid_cell_and_on_every_reconnect(gateway):
    g = gateway("ws-close")

    async def go():
        msg_id, frames, closed = await exec_and_collect(g, seconds=5)
        types = [v1_decode(f)["header"]["msg_type"] for f in frames]
        assert closed and "stream" in types and "execute_reply" not in types
        kid = json.loads((await rest(g, "GET", "/api/kernels")).body)[0]["id"]
        ws = await connect(g, kid)
        assert await asyncio.wait_for(ws.read_message(), 5) is None
        assert ws.close_code == 1011
    run(go())


def legacy_msgs(frames):
    out = []
    for f in frames:
        assert isinstance(f, str), "legacy mode sent a binary frame"
        try:
            out.append(json.loads(f))
        except ValueError:
            out.append(None)
    return out


def test_legacy_json_modes_misbehave_too(gateway):
    """The legacy JSON framing gets the same faults where they apply."""
    def collect(mode, **kw):
        g = gateway(mode, protocol="legacy")
        return run(exec_and_collect(g, **kw))

    _, frames, _ = collect("wrong-channel", limit=4)
    assert not {m["channel"] for m in legacy_msgs(frames)} & {
        "shell", "iopub", "stdin", "control"}
    _, frames, _ = collect("invalid-json", limit=4)
    assert legacy_msgs(frames).count(None) == 1
    msg_id, frames, _ = collect("forged-parent", limit=6)
    assert all(m["parent_header"]["msg_id"] != msg_id
               for m in legacy_msgs(frames))
    msg_id, frames, closed = collect("flood", seconds=10, limit=2000)
    msgs = legacy_msgs(frames)
    assert not closed and len(msgs) == 2000
    assert "execute_reply" not in {m["header"]["msg_type"] for m in msgs}
    _, frames, closed = collect("ws-close", seconds=5)
    assert closed and "execute_reply" not in {
        m["header"]["msg_type"] for m in legacy_msgs(frames)}


def handshake_head(g, kid):
    """The status line and headers the WebSocket handshake is answered
    with, read by hand (a client library would follow or raise)."""
    with socket.create_connection(("127.0.0.1", g.port)) as s:
        s.sendall(("GET /api/kernels/%s/channels HTTP/1.1\r\nHost: x\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n"
                   "Authorization: token %s\r\n\r\n" % (kid, TOKEN)).encode())
        s.settimeout(10)
        buf = b""
        while b"\r\n\r\n" not in buf:
            got = s.recv(4096)
            if not got:
                break
            buf += got
        return buf.partition(b"\r\n\r\n")[0].decode()


def test_ws_redirect_answers_302_to_another_port(gateway):
    g = gateway("ws-redirect")

    async def go():
        return await start_kernel(g)
    kid = run(go())
    head = handshake_head(g, kid)
    assert " 302 " in head.split("\r\n")[0]
    loc = [l for l in head.split("\r\n") if l.lower().startswith("location:")]
    assert loc and "ws://127.0.0.1:" in loc[0] and kid in loc[0]
    assert ":%d/" % g.port not in loc[0]
    # The second listener logs what reaches it.
    port = int(loc[0].split("127.0.0.1:")[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nAuthorization: token x\r\n\r\n")
        s.settimeout(10)
        s.recv(1)
    time.sleep(0.5)
    assert "token leaked" in g.stop()


def test_ws_400_refuses_every_handshake(gateway):
    g = gateway("ws-400")

    async def go():
        return await start_kernel(g)
    kid = run(go())
    for _ in range(2):
        assert " 400 " in handshake_head(g, kid).split("\r\n")[0]
