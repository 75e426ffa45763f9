"""startup (a): jupyter_client KernelManager cold start.

    startup_jc.py RUNS WARMUP

Each run: KernelManager(kernel_name="python3").start_kernel(), a blocking
client with channels started and wait_for_ready() (first kernel_info_reply,
then an iopub message) -> "ready"; then execute("1+1") until its
execute_result arrives -> "result". Both measured from the start_kernel
call. The kernel is shut down afterwards, untimed. jupyter_client's own
defaults throughout (tcp on 127.0.0.1).
"""
import sys

from jupyter_client import KernelManager

import benchlib


def one_run():
    t0 = benchlib.now_us()
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        t1 = benchlib.now_us()
        msg_id = kc.execute("1+1")
        t2 = None
        while True:
            m = kc.get_iopub_msg(timeout=30)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "execute_result" and t2 is None:
                t2 = benchlib.now_us()
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    if t2 is None:
        raise RuntimeError("1+1 produced no execute_result")
    return t1 - t0, t2 - t0


def main():
    runs, warm = int(sys.argv[1]), int(sys.argv[2])
    ready, result = [], []
    for i in range(warm + runs):
        r, x = one_run()
        if i >= warm:
            ready.append(r)
            result.append(x)
    benchlib.emit({
        "launcher": "jupyter_client %s KernelManager" % __import__("jupyter_client").__version__,
        "ready_us": ready,
        "result_us": result,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
