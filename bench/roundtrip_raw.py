"""roundtrip (c): the floor. A minimal raw-ZeroMQ client with pyzmq.

    roundtrip_raw.py CONNECTION_FILE N WARMUP

It does the bare minimum the protocol requires and nothing else: sign the
request (HMAC-SHA256 over the four JSON frames), send it on a DEALER, and
watch the shell DEALER and iopub SUB until the execute_reply and the iopub
status idle of that msg_id appear. Replies are matched by searching the raw
parent_header/content bytes: no signature check and no JSON parsing of what
comes back. What is left is close to what the kernel itself takes plus
pyzmq's per-call cost, which is why this is the "floor".
"""
import hashlib
import hmac
import json
import sys
import uuid

import zmq

import benchlib

DELIM = b"<IDS|MSG>"
CONTENT = json.dumps({
    "code": "pass", "silent": False, "store_history": True,
    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True,
}).encode()


def endpoint(info, port):
    if info["transport"] == "ipc":
        return "ipc://%s-%d" % (info["ip"], info[port])
    return "tcp://%s:%d" % (info["ip"], info[port])


def main():
    conn, n, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(conn) as f:
        info = json.load(f)
    key = info["key"].encode()
    session = uuid.uuid4().hex
    ctx = zmq.Context()
    shell = ctx.socket(zmq.DEALER)
    shell.linger = 0
    shell.connect(endpoint(info, "shell_port"))
    iopub = ctx.socket(zmq.SUB)
    iopub.linger = 0
    iopub.setsockopt(zmq.SUBSCRIBE, b"")
    iopub.connect(endpoint(info, "iopub_port"))
    poller = zmq.Poller()
    poller.register(shell, zmq.POLLIN)
    poller.register(iopub, zmq.POLLIN)

    def send(msg_type, content):
        msg_id = uuid.uuid4().hex
        header = json.dumps({
            "msg_id": msg_id, "msg_type": msg_type, "username": "bench",
            "session": session, "date": "2024-01-01T00:00:00.000000Z",
            "version": "5.3"}).encode()
        h = hmac.new(key, digestmod=hashlib.sha256)
        for part in (header, b"{}", b"{}", content):
            h.update(part)
        shell.send_multipart([DELIM, h.hexdigest().encode(), header, b"{}", b"{}", content])
        return msg_id.encode()

    def wait(mid, timeout_ms):
        """True once the shell reply and the iopub idle of mid arrived."""
        got_reply = got_idle = False
        while not (got_reply and got_idle):
            events = poller.poll(timeout_ms)
            if not events:
                return False
            for sock, _ in events:
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    i = frames.index(DELIM)
                    if mid not in frames[i + 3]:
                        continue
                    if sock is shell:
                        got_reply = True
                    elif b'"idle"' in frames[i + 5]:
                        got_idle = True
        return True

    # Our SUB's subscription reaches the kernel asynchronously: repeat
    # kernel_info until its iopub status shows up, as every client must.
    while not wait(send("kernel_info_request", b"{}"), 1000):
        pass
    samples = []
    for i in range(warm + n):
        if i == warm:
            u0, s0 = benchlib.cpu_us()
        t0 = benchlib.now_us()
        ok = wait(send("execute_request", CONTENT), 60000)
        t1 = benchlib.now_us()
        if not ok:
            benchlib.emit({"error": "no reply within 60 s"})
            return 3
        if i >= warm:
            samples.append(t1 - t0)
    u1, s1 = benchlib.cpu_us()
    benchlib.emit({
        "client": "raw pyzmq %s (floor)" % zmq.__version__,
        "samples_us": samples,
        "cpu_user_us": u1 - u0,
        "cpu_sys_us": s1 - s0,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
