"""startup_warm reference: a new jupyter_client kernel per session.

    startup_warm_jc.py RUNS WARMUP

Each run, timed from the KernelManager() call: start_kernel(), a blocking
client, wait_for_ready(); execute("1+1") until its execute_result
("result_us"); then the same DataFrame plot as bench/startup_warm.c until a
display_data with image/png arrives ("chart_us"). The kernel is a plain
process (jupyter_client has no sandbox), so this is the cost floor of the
Python stack. Shut down afterwards, untimed.
"""
import sys

from jupyter_client import KernelManager

import benchlib

CHART = ("import pandas as pd\n"
         "pd.DataFrame({'a': [1, 3, 2], 'b': [2, 1, 3]}).plot();")


def run_until(kc, code, want):
    msg_id = kc.execute(code)
    seen = None
    while True:
        m = kc.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if seen is None and want(m):
            seen = benchlib.now_us()
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return seen


def one_run():
    t0 = benchlib.now_us()
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        t1 = benchlib.now_us()
        r = run_until(kc, "1+1", lambda m: m["msg_type"] == "execute_result")
        c = run_until(kc, CHART, lambda m: m["msg_type"] == "display_data"
                      and "image/png" in m["content"]["data"])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    if r is None or c is None:
        raise RuntimeError("no result or no PNG")
    return t1 - t0, r - t0, c - t0


def main():
    runs, warm = int(sys.argv[1]), int(sys.argv[2])
    ready, result, chart = [], [], []
    for i in range(warm + runs):
        a, b, c = one_run()
        if i >= warm:
            ready.append(a)
            result.append(b)
            chart.append(c)
    benchlib.emit({"mode": "jupyter_client", "ready_us": ready,
                   "result_us": result, "chart_us": chart, "misses": 0,
                   "loadavg": __import__("os").getloadavg()[0]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
