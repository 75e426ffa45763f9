"""roundtrip (b): jupyter_client.BlockingKernelClient executing `pass`.

    roundtrip_jc.py CONNECTION_FILE N WARMUP

One sample: kc.execute("pass") until both its execute_reply (shell) and its
iopub status idle were received, as in bench/roundtrip.c.
"""
import sys

import benchlib


def main():
    conn, n, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kc = benchlib.blocking_client(conn)
    samples = []
    count = None
    for i in range(warm + n):
        if i == warm:
            u0, s0 = benchlib.cpu_us()
        t0 = benchlib.now_us()
        msg_id = kc.execute("pass")
        reply, _ = benchlib.wait_done(kc, msg_id)
        t1 = benchlib.now_us()
        if reply["content"]["status"] != "ok":
            benchlib.emit({"error": "execute_reply status %s" % reply["content"]["status"]})
            return 3
        count = reply["content"].get("execution_count")
        if i >= warm:
            samples.append(t1 - t0)
    u1, s1 = benchlib.cpu_us()
    kc.stop_channels()
    benchlib.emit({
        "client": "jupyter_client %s BlockingKernelClient" % __import__("jupyter_client").__version__,
        "samples_us": samples,
        "cpu_user_us": u1 - u0,
        "cpu_sys_us": s1 - s0,
        "kernel_execution_count": count,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
