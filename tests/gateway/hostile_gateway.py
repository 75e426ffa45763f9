"""A Jupyter Server kernel gateway that misbehaves on demand, for tests.

    /usr/bin/python3 tests/gateway/hostile_gateway.py --mode MODE \
        [--token T] [--protocol v1|legacy] [--lifetime S]

Binds 127.0.0.1 on a free port and prints the port on stdout, one line,
once it is listening. It speaks just enough of the API jupyter_server and
Enterprise Gateway serve: GET /api, GET /api/kernelspecs, GET/POST
/api/kernels, GET/DELETE /api/kernels/ID, POST .../interrupt and
.../restart, and the WebSocket /api/kernels/ID/channels, with the
`v1.kernel.websocket.jupyter.org` binary subprotocol when the client offers
it (and --protocol v1, the default) or the legacy JSON text framing. Every
request needs `Authorization: token T` when --token is given (else 403).

Modes (MODES below): `normal` answers kernel_info and execute correctly
(stream "hello", execute_reply ok, idle), so a client's failure in another
mode is the mode's doing. Every other mode misbehaves at the first
execute_request (or at POST /api/kernels, or at the WebSocket handshake),
except a silent one with user expressions: that is the client's own
housekeeping (the session's working directory), answered correctly.
What it did goes to stderr. The process exits after --lifetime seconds
(default 600) so a forgotten server does not linger.

tests/interop/test_hostile_gateway_server.py checks that each mode really
misbehaves as described; tests/security/hostile_gateway.sh points
`jupyter-agent exec --gateway` at each one.
"""
import argparse
import asyncio
import datetime
import json
import sys
import uuid

import tornado.httpserver
import tornado.iostream
import tornado.netutil
import tornado.web
import tornado.websocket

V1 = "v1.kernel.websocket.jupyter.org"
MIB = 1024 * 1024
GIB = 1024 * MIB
# EG's answer when a user is over EG_MAX_KERNELS_PER_USER (remotemanager.py).
EG_LIMIT = ("A max kernels per user limit has been set to 10 and user "
            "'alice' currently has 10 active kernels.")

MODES = {
    "normal": "answers correctly (the baseline)",
    "oversized-frame": "a WebSocket frame announcing 1 GiB, 600 MiB sent, then EOF",
    "oversized-message": "one complete 300 MiB v1/JSON message (a stream output)",
    "offsets-past-end": "a v1 offset table pointing past the end of the frame",
    "offsets-decreasing": "a v1 offset table whose offsets go backwards",
    "offsets-huge-count": "a v1 frame announcing 2**60 offsets",
    "wrong-channel": "every reply on channels that do not exist",
    "flood": "a never-ending iopub stream for the execution, never a reply",
    "never-idle": "execute_reply, then status busy forever, never idle",
    "invalid-json": "a reply whose header is not JSON",
    "forged-parent": "outputs and replies whose parent msg_id is not the request's",
    "ws-close": "the WebSocket closed mid-cell (and at once on every reconnect)",
    "http-403": "POST /api/kernels refused with EG's resource-limit 403",
    "slowloris": "POST /api/kernels answered one byte per second, never finished",
    "rest-huge": "POST /api/kernels answered at once with a 64 MiB body",
    "workdir-relative": "the session's working directory answered as a relative path",
    "workdir-nul": "the session's working directory answered with a NUL inside",
    "workdir-not-hex": "the session's working directory answered as raw text, not hex",
    "ws-hang": "the WebSocket handshake never answered",
    "ws-hang-once": "the first WebSocket handshake never answered, later ones at once (a kernel that missed its kernel_info nudges)",
    "ws-drop": "the first two WebSocket handshakes hung up unanswered (a busy server)",
    "ws-drop-dead": "every WebSocket handshake hung up, the kernel's model reports it dead",
    "ws-redirect": "the WebSocket handshake answered 302 to a second listener that logs what reaches it",
    "ws-400": "every WebSocket handshake answered 400 Bad Request",
    "dense-json": "one stream output of 48 MiB of [0,0,...] for the execution and one for another parent, then hello",
}
CHANNELS = ("shell", "iopub", "stdin", "control")


def log(text):
    sys.stderr.write("hostile_gateway: %s\n" % text)
    sys.stderr.flush()


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def v1_frame(channel, parts):
    """The v1 binary framing (jupyter_server's serialize_msg_to_ws_v1):
    the offset count, the offsets (8-byte little endian), the channel, then
    header, parent_header, metadata, content and buffers."""
    ch = channel.encode()
    offsets = [8 * (1 + 1 + len(parts) + 1)]
    offsets.append(offsets[-1] + len(ch))
    for p in parts:
        offsets.append(offsets[-1] + len(p))
    head = len(offsets).to_bytes(8, "little") + b"".join(
        o.to_bytes(8, "little") for o in offsets)
    return head + ch + b"".join(parts)


def ws_header(length, binary=True):
    """A server-to-client frame header (FIN, unmasked) for `length` bytes."""
    op = 0x82 if binary else 0x81
    if length < 126:
        return bytes([op, length])
    if length < 65536:
        return bytes([op, 126]) + length.to_bytes(2, "big")
    return bytes([op, 127]) + length.to_bytes(8, "big")


class Kernels:
    """The kernels this server pretends to run."""

    def __init__(self):
        self.models = {}

    def new(self, name):
        kid = str(uuid.uuid4())
        self.models[kid] = {"id": kid, "name": name, "last_activity": now(),
                            "execution_state": "idle", "connections": 0}
        return self.models[kid]


class Base(tornado.web.RequestHandler):
    def prepare(self):
        token = self.settings["token"]
        if token and self.request.headers.get("Authorization") != "token " + token \
                and self.get_argument("token", None) != token:
            log("403: bad or missing token on %s" % self.request.path)
            self.send_json(403, {"message": "Forbidden", "reason": None})
            self.finish()

    def send_json(self, status, obj):
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(obj))

    def check_xsrf_cookie(self):
        pass


class ApiHandler(Base):
    def get(self):
        self.send_json(200, {"version": "1.23.3"})


class KernelspecsHandler(Base):
    def get(self):
        spec = {"argv": ["python3", "-m", "ipykernel_launcher", "-f",
                         "{connection_file}"],
                "display_name": "Python 3 (hostile)", "language": "python",
                "env": {}, "metadata": {}, "interrupt_mode": "signal"}
        self.send_json(200, {"default": "python3", "kernelspecs": {
            "python3": {"name": "python3", "spec": spec, "resources": {}}}})


class KernelsHandler(Base):
    def get(self):
        self.send_json(200, list(self.settings["kernels"].models.values()))

    async def post(self):
        mode = self.settings["mode"]
        body = json.loads(self.request.body or b"{}")
        if mode == "http-403":
            log("POST /api/kernels: 403 resource limit")
            # EG's JSONErrorsMixin: the reason in the status line and the body.
            self.set_status(403, reason="Forbidden")
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps({"reason": EG_LIMIT, "message": EG_LIMIT}))
            return
        if mode == "slowloris":
            await self.slowloris()
            return
        if mode == "rest-huge":
            await self.huge_body()
            return
        model = self.settings["kernels"].new(body.get("name") or "python3")
        log("POST /api/kernels: started %s (env %s)" % (
            model["id"], sorted((body.get("env") or {}).keys())))
        self.set_header("Location", "/api/kernels/" + model["id"])
        self.send_json(201, model)

    async def huge_body(self):
        """A kernel model followed by 64 MiB of padding, as fast as the
        client reads it: a REST answer has to be bounded by its size."""
        log("POST /api/kernels: a 64 MiB body")
        self.set_status(201)
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps({"id": str(uuid.uuid4()), "name": "python3"})[:-1])
        self.write(', "pad": "')
        pad = "x" * (1 << 20)
        try:
            for _ in range(64):
                self.write(pad)
                await self.flush()
            self.write('"}')
        except tornado.iostream.StreamClosedError:
            log("rest-huge: the client went away")

    async def slowloris(self):
        """Status and headers promptly, then the body a byte a second."""
        log("POST /api/kernels: slow-loris body, one byte per second")
        self.set_status(201)
        self.set_header("Content-Type", "application/json")
        self.set_header("Content-Length", "1048576")
        body = json.dumps({"id": str(uuid.uuid4()), "name": "python3"}) + " " * 1048576
        for ch in body[:1048576]:
            try:
                self.write(ch)
                await self.flush()
            except tornado.iostream.StreamClosedError:
                log("slowloris: the client went away")
                return
            await asyncio.sleep(1)


class KernelHandler(Base):
    def get(self, kid):
        model = self.settings["kernels"].models.get(kid)
        if model is None:
            self.send_json(404, {"message": "Kernel does not exist: " + kid})
        elif self.settings["mode"] == "ws-drop-dead":
            log("ws-drop-dead: GET /api/kernels/%s says dead" % kid)
            self.send_json(200, dict(model, execution_state="dead"))
        else:
            self.send_json(200, model)

    def delete(self, kid):
        if self.settings["kernels"].models.pop(kid, None) is None:
            self.send_json(404, {"message": "Kernel does not exist: " + kid})
        else:
            log("DELETE /api/kernels/%s" % kid)
            self.set_status(204)


class KernelActionHandler(Base):
    def post(self, kid, action):
        model = self.settings["kernels"].models.get(kid)
        if model is None:
            self.send_json(404, {"message": "Kernel does not exist: " + kid})
            return
        log("POST /api/kernels/%s/%s" % (kid, action))
        if action == "restart":
            self.send_json(200, model)
        else:
            self.set_status(204)


class ChannelsHandler(tornado.websocket.WebSocketHandler):
    """The kernel's channels, misbehaving by mode."""

    def initialize(self):
        self.session = uuid.uuid4().hex
        self.tasks = set()

    async def get(self, kid):
        token = self.settings["token"]
        if token and self.request.headers.get("Authorization") != "token " + token \
                and self.get_argument("token", None) != token:
            log("403: bad or missing token on the WebSocket")
            self.set_status(403)
            self.finish()
            return
        if kid not in self.settings["kernels"].models:
            self.set_status(404)
            self.finish()
            return
        mode = self.settings["mode"]
        if mode == "ws-redirect":
            log("ws-redirect: 302 to the second listener")
            self.set_status(302)
            self.set_header("Location", "ws://127.0.0.1:%d/api/kernels/%s/channels"
                            % (self.settings["trap_port"], kid))
            self.finish()
            return
        if mode == "ws-400":
            self.settings["ws_dropped"] += 1
            log("ws-400: refusing handshake %d" % self.settings["ws_dropped"])
            self.set_status(400)
            self.finish()
            return
        if mode == "ws-hang-once" and self.settings["ws_dropped"] < 1:
            self.settings["ws_dropped"] += 1
            log("ws-hang-once: not answering the first WebSocket handshake")
            await asyncio.sleep(self.settings["lifetime"])
            return
        if mode == "ws-hang":
            log("ws-hang: not answering the WebSocket handshake")
            await asyncio.sleep(self.settings["lifetime"])
            return
        if mode == "ws-drop-dead" or (mode == "ws-drop" and self.settings["ws_dropped"] < 2):
            self.settings["ws_dropped"] += 1
            log("ws-drop: hanging up handshake %d unanswered"
                % self.settings["ws_dropped"])
            self.request.connection.stream.close()
            return
        if mode == "ws-close" and self.settings["ws_opened"] > 0:
            log("ws-close: refusing reconnect %d" % self.settings["ws_opened"])
        await super().get(kid)

    def select_subprotocol(self, subprotocols):
        if self.settings["protocol"] == "v1" and V1 in subprotocols:
            return V1
        return None

    def open(self, kid):
        self.settings["ws_opened"] += 1
        self.v1 = self.selected_subprotocol == V1
        log("WebSocket open (%s)" % ("v1" if self.v1 else "legacy JSON"))
        if self.settings["mode"] == "ws-close" and self.settings["ws_opened"] > 1:
            self.close(1011, "hostile gateway: closed on reconnect")

    def check_origin(self, origin):
        return True

    # ---------------------------------------------------------- sending

    def msg(self, msg_type, parent, content, channel):
        header = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type,
                  "username": "hostile", "session": self.session,
                  "date": now(), "version": "5.3"}
        return {"header": header, "parent_header": parent, "metadata": {},
                "content": content, "channel": channel, "buffers": []}

    def encode(self, m):
        if self.v1:
            return v1_frame(m["channel"], [
                json.dumps(m[k]).encode() for k in
                ("header", "parent_header", "metadata", "content")])
        return json.dumps({k: m[k] for k in m if k != "buffers"})

    async def send(self, msg_type, parent, content, channel):
        m = self.msg(msg_type, parent, content, channel)
        await self.write_message(self.encode(m), binary=self.v1)

    async def send_raw(self, data):
        await self.write_message(data, binary=isinstance(data, bytes))

    # -------------------------------------------------------- receiving

    def decode(self, data):
        if isinstance(data, bytes):
            n = int.from_bytes(data[:8], "little")
            offs = [int.from_bytes(data[8 * (i + 1):8 * (i + 2)], "little")
                    for i in range(min(n, 16))]
            channel = data[offs[0]:offs[1]].decode()
            parts = [json.loads(data[offs[i]:offs[i + 1]])
                     for i in range(1, 5)]
            return dict(zip(("header", "parent_header", "metadata",
                             "content"), parts), channel=channel)
        return json.loads(data)

    def on_message(self, data):
        try:
            m = self.decode(data)
        except (ValueError, IndexError, UnicodeDecodeError) as e:
            log("undecodable client message: %s" % e)
            return
        t = asyncio.ensure_future(self.handle(m))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def on_close(self):
        log("WebSocket closed by the client")
        for t in list(self.tasks):
            t.cancel()

    async def handle(self, m):
        msg_type = m["header"]["msg_type"]
        parent = m["header"]
        try:
            if msg_type == "kernel_info_request":
                await self.kernel_info(parent, m.get("channel", "shell"))
            elif msg_type == "execute_request" and \
                    m.get("content", {}).get("silent") and \
                    m.get("content", {}).get("user_expressions"):
                await self.housekeeping(parent)
            elif msg_type == "execute_request":
                await getattr(self, "exec_" + self.settings["mode"].replace(
                    "-", "_"), self.exec_normal)(parent)
            elif msg_type in ("interrupt_request", "shutdown_request"):
                await self.send(msg_type.replace("request", "reply"), parent,
                                {"status": "ok"}, "control")
        except (tornado.websocket.WebSocketClosedError,
                tornado.iostream.StreamClosedError):
            log("%s: the client went away" % msg_type)

    async def kernel_info(self, parent, channel):
        await self.send("status", parent, {"execution_state": "busy"}, "iopub")
        await self.send("kernel_info_reply", parent, {
            "status": "ok", "protocol_version": "5.3",
            "implementation": "hostile", "implementation_version": "1",
            "language_info": {"name": "python", "version": "3",
                              "mimetype": "text/x-python",
                              "file_extension": ".py"},
            "banner": "", "help_links": []}, channel)
        await self.send("status", parent, {"execution_state": "idle"}, "iopub")

    async def housekeeping(self, parent):
        """A silent execute with user expressions is the client's own
        (its session's working directory, made at start and removed at
        the end): answered as a kernel would, with a path in the form it
        asks for (hex in a repr), so every mode misbehaves at the user's
        execution, not before."""
        path = {"workdir-relative": b"../../etc",
                "workdir-nul": b"/tmp/x\x00/etc"}.get(
                    self.settings["mode"], b"/tmp/jupyter-agent-hostile")
        value = "'%s'" % path.hex()
        if self.settings["mode"] == "workdir-not-hex":
            value = "'/tmp/\x1b]52;c;aGk=\x07'"
        await self.send("status", parent, {"execution_state": "busy"}, "iopub")
        await self.send("execute_reply", parent, {
            "status": "ok", "execution_count": 0, "payload": [],
            "user_expressions": {"r": {"status": "ok", "metadata": {},
                                       "data": {"text/plain": value}}}},
            "shell")
        await self.send("status", parent, {"execution_state": "idle"}, "iopub")

    async def busy_input(self, parent):
        await self.send("status", parent, {"execution_state": "busy"}, "iopub")
        await self.send("execute_input", parent, {
            "code": parent.get("code", ""), "execution_count": 1}, "iopub")

    async def finish_ok(self, parent, channel_reply="shell", channel_io="iopub"):
        await self.send("execute_reply", parent, {
            "status": "ok", "execution_count": 1, "user_expressions": {},
            "payload": []}, channel_reply)
        await self.send("status", parent, {"execution_state": "idle"}, channel_io)

    # ------------------------------------------------------------ modes

    async def exec_normal(self, parent):
        await self.busy_input(parent)
        await self.send("stream", parent, {"name": "stdout", "text": "hello\n"},
                        "iopub")
        await self.finish_ok(parent)

    async def raw_message(self, announced, sent, prefix=b"", suffix=b""):
        """One frame whose header announces `announced` payload bytes; the
        payload is prefix, filler and suffix, `sent` bytes in all (EOF
        follows when that is short of the announcement)."""
        stream = self.ws_connection.stream
        await stream.write(ws_header(announced, binary=self.v1))
        await stream.write(prefix)
        chunk = b"a" * MIB
        left = sent - len(prefix) - len(suffix)
        while left > 0:
            await stream.write(chunk[:min(left, MIB)])
            left -= min(left, MIB)
        await stream.write(suffix)
        log("sent %d of %d announced bytes in one frame" % (sent, announced))

    async def exec_oversized_frame(self, parent):
        await self.busy_input(parent)
        await self.raw_message(GIB, 600 * MIB)
        self.ws_connection.stream.close()

    async def exec_oversized_message(self, parent):
        await self.busy_input(parent)
        total_text = 300 * MIB
        m = self.msg("stream", parent, {"name": "stdout", "text": "@@"}, "iopub")
        whole = self.encode(m)
        if isinstance(whole, str):
            whole = whole.encode()
        # Split the encoded message around the "@@" text and fill it.
        pre, post = whole.split(b"@@")
        if self.v1:
            # The content part (and so its end offset) grows by the filler.
            n = int.from_bytes(pre[:8], "little")
            offs = [int.from_bytes(pre[8 * (i + 1):8 * (i + 2)], "little")
                    for i in range(n)]
            offs[-1] += total_text - 2
            pre = pre[:8] + b"".join(o.to_bytes(8, "little") for o in offs) + \
                pre[8 * (n + 1):]
        size = len(pre) + total_text + len(post)
        await self.raw_message(size, size, pre, post)

    async def bad_offsets(self, parent, mutate):
        await self.busy_input(parent)
        if not self.v1:
            await self.send_raw('{"header": ')  # legacy: a truncated JSON text
            return
        m = self.msg("execute_reply", parent, {"status": "ok",
                                               "execution_count": 1}, "shell")
        frame = bytearray(self.encode(m))
        mutate(frame)
        await self.send_raw(bytes(frame))
        await self.send("status", parent, {"execution_state": "idle"}, "iopub")

    async def exec_offsets_past_end(self, parent):
        def past_end(f):
            n = int.from_bytes(f[:8], "little")
            f[8 * n:8 * (n + 1)] = (len(f) + 1000000).to_bytes(8, "little")
        await self.bad_offsets(parent, past_end)

    async def exec_offsets_decreasing(self, parent):
        def decreasing(f):
            # The channel's end offset before its start.
            f[16:24] = (0).to_bytes(8, "little")
        await self.bad_offsets(parent, decreasing)

    async def exec_offsets_huge_count(self, parent):
        def huge(f):
            f[0:8] = (1 << 60).to_bytes(8, "little")
        await self.bad_offsets(parent, huge)

    async def exec_wrong_channel(self, parent):
        await self.send("status", parent, {"execution_state": "busy"}, "iopub2")
        await self.send("stream", parent, {"name": "stdout", "text": "WRONG\n"},
                        "../shell")
        await self.finish_ok(parent, channel_reply="", channel_io="IOPUB")

    async def exec_flood(self, parent):
        await self.busy_input(parent)
        line = ("x" * 1023 + "\n") * 64
        n = 0
        while True:
            await self.send("stream", parent, {"name": "stdout", "text": line},
                            "iopub")
            n += 1
            if n % 1000 == 0:
                log("flood: %d outputs (%d MiB)" % (n, n * len(line) // MIB))

    async def exec_never_idle(self, parent):
        await self.busy_input(parent)
        await self.send("execute_reply", parent, {
            "status": "ok", "execution_count": 1, "user_expressions": {},
            "payload": []}, "shell")
        while True:
            await self.send("status", parent, {"execution_state": "busy"},
                            "iopub")
            await asyncio.sleep(0.05)

    async def exec_invalid_json(self, parent):
        await self.busy_input(parent)
        if self.v1:
            await self.send_raw(v1_frame("shell", [
                b"{not json", json.dumps(parent).encode(), b"{}",
                b'{"status": "ok"}']))
        else:
            await self.send_raw("{not json")
        await self.send("status", parent, {"execution_state": "idle"}, "iopub")

    async def exec_forged_parent(self, parent):
        forged = dict(parent, msg_id=uuid.uuid4().hex)
        await self.busy_input(forged)
        await self.send("stream", forged, {"name": "stdout", "text": "FORGED\n"},
                        "iopub")
        await self.send("error", forged, {"ename": "Forged", "evalue": "FORGED",
                                          "traceback": ["FORGED"]}, "iopub")
        await self.finish_ok(forged)

    async def exec_dense_json(self, parent):
        """48 MiB of [0,0,...] in a stream's content, for this execution and
        for another: jansson would build ~1 GiB of each."""
        await self.busy_input(parent)
        pad = b"[" + b"0," * (24 * MIB) + b"0]"
        for par in (dict(parent, msg_id=uuid.uuid4().hex), parent):
            m = self.msg("stream", par, {"name": "stdout", "text": "@@"}, "iopub")
            if self.v1:
                parts = [json.dumps(m[k]).encode() for k in
                         ("header", "parent_header", "metadata")]
                parts.append(b'{"name":"stdout","text":"DENSE","pad":' + pad + b"}")
                await self.send_raw(v1_frame("iopub", parts))
            else:
                text = json.dumps({k: m[k] for k in m if k != "buffers"}).encode()
                pre, post = text.split(b'"@@"')
                await self.write_message(pre + b'"DENSE", "pad": ' + pad + post,
                                         binary=False)
            log("dense-json: sent 48 MiB of [0,...] for parent %s"
                % par["msg_id"][:8])
        await self.send("stream", parent, {"name": "stdout", "text": "hello\n"},
                        "iopub")
        await self.finish_ok(parent)

    async def exec_ws_close(self, parent):
        await self.busy_input(parent)
        await self.send("stream", parent, {"name": "stdout",
                                           "text": "before the close\n"},
                        "iopub")
        log("ws-close: closing mid-cell")
        self.close(1011, "hostile gateway: closed mid-cell")


def make_app(args):
    settings = {"mode": args.mode, "token": args.token,
                "protocol": args.protocol, "kernels": Kernels(),
                "lifetime": args.lifetime, "ws_opened": 0,
                "ws_dropped": 0, "trap_port": args.trap_port,
                # The client's messages are small; never buffer a big one.
                "websocket_max_message_size": 16 * MIB}
    kid = r"([0-9a-f-]{36})"
    return tornado.web.Application([
        (r"/api", ApiHandler),
        (r"/api/kernelspecs", KernelspecsHandler),
        (r"/api/kernels", KernelsHandler),
        (r"/api/kernels/%s" % kid, KernelHandler),
        (r"/api/kernels/%s/(interrupt|restart)" % kid, KernelActionHandler),
        (r"/api/kernels/%s/channels" % kid, ChannelsHandler),
    ], **settings)


async def trap(reader, writer):
    """The second host of ws-redirect: whatever reaches it is logged (the
    client must never come here, least of all with the token)."""
    head = await reader.read(65536)
    leaked = b"authorization:" in head.lower()
    log("redirect target: a connection reached it%s" % (
        " WITH the Authorization header (token leaked)" if leaked else ""))
    writer.close()


async def serve(args):
    trap_server = await asyncio.start_server(trap, "127.0.0.1", 0)
    args.trap_port = trap_server.sockets[0].getsockname()[1]
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server = tornado.httpserver.HTTPServer(make_app(args))
    server.add_sockets(sockets)
    print(sockets[0].getsockname()[1], flush=True)
    log("mode %s (%s), %s protocol, listening on 127.0.0.1:%d" % (
        args.mode, MODES[args.mode], args.protocol,
        sockets[0].getsockname()[1]))
    await asyncio.sleep(args.lifetime)
    log("lifetime of %d s over, exiting" % args.lifetime)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", default="normal", choices=sorted(MODES))
    p.add_argument("--token", default="")
    p.add_argument("--protocol", default="v1", choices=("v1", "legacy"))
    p.add_argument("--lifetime", type=int, default=600)
    p.add_argument("--list", action="store_true", help="print the modes")
    args = p.parse_args()
    if args.list:
        for name, what in MODES.items():
            print("%-20s %s" % (name, what))
        return 0
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
