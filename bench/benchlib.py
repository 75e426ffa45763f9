"""Helpers shared by the Python side of the benchmarks (driver and clients).

Clients print ONE JSON object on stdout, like the C programs (bench/bench.h).
"""
import json
import math
import os
import resource
import sys
import time


def emit(obj):
    """Print the client's result as one line of JSON."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def now_us():
    return time.perf_counter_ns() // 1000


def cpu_us():
    """(user, system) CPU of this process, all threads, in microseconds."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return int(ru.ru_utime * 1e6), int(ru.ru_stime * 1e6)


def percentile(samples, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(samples)
    rank = max(1, math.ceil(p / 100.0 * len(s)))
    return s[rank - 1]


def median(samples):
    s = sorted(samples)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def blocking_client(connection_file, unlimited_hwm=False):
    """A jupyter_client BlockingKernelClient attached to a running kernel,
    channels started and ready, exactly as its documentation shows.

    unlimited_hwm: give its sockets ZMQ_RCVHWM=0 (through the context's
    default socket options), so a burst of iopub messages queues in the
    client instead of being dropped by the kernel's PUB socket once 1000
    are waiting (libzmq's default high-water mark)."""
    from jupyter_client import BlockingKernelClient

    kw = {}
    if unlimited_hwm:
        import zmq
        import zmq.asyncio

        ctx = zmq.asyncio.Context()
        ctx.setsockopt(zmq.RCVHWM, 0)
        kw["context"] = ctx
    kc = BlockingKernelClient(**kw)
    kc.load_connection_file(connection_file)
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return kc


def wait_done(kc, msg_id, on_iopub=None, timeout=60, quiet=None):
    """Wait, the jupyter_client way, until the execute_reply of msg_id AND
    its iopub status idle were both received (each message deserialized and
    signature-checked by jupyter_client.Session). Returns (reply, saw_idle).

    quiet: after the reply, give up waiting for idle once iopub has been
    silent this many seconds (saw_idle is then False: messages were lost);
    None waits up to `timeout` and raises queue.Empty."""
    from queue import Empty

    reply = None
    while reply is None:
        m = kc.get_shell_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") == msg_id:
            reply = m
    while True:
        try:
            m = kc.get_iopub_msg(timeout=quiet if quiet else timeout)
        except Empty:
            if quiet:
                return reply, False
            raise
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if on_iopub:
            on_iopub(m)
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return reply, True


def env_int(name, default):
    try:
        v = int(os.environ.get(name, ""))
        return v if v > 0 else default
    except ValueError:
        return default


BURNER = r"""
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""


class cpu_load:
    """A bounded background CPU load for "under contention" rows: `n` busy
    loops (BENCH_LOAD, default 2: one per core on a 2-core machine), each
    in a session of its own, as unrelated work on a shared machine is (so
    each gets its own autogroup). Every loop also ends by itself after
    `limit_s`, so a benchmark that dies cannot leave them spinning.

        with benchlib.cpu_load() as n: ...
    """

    def __init__(self, n=None, limit_s=900):
        self.n = env_int("BENCH_LOAD", 2) if n is None else n
        self.limit_s = limit_s
        self.procs = []

    def __enter__(self):
        import subprocess
        for _ in range(self.n):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", BURNER, str(self.limit_s)],
                start_new_session=True, stdin=subprocess.DEVNULL))
        time.sleep(1.0)  # let the load average and the scheduler see them
        return self.n

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        return False
