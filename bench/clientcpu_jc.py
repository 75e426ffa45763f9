"""clientcpu (b): jupyter_client's own CPU cost per iopub message.

    clientcpu_jc.py CONNECTION_FILE MESSAGES

Runs the same cell as bench/clientcpu.c on a BlockingKernelClient. Every
iopub message is received and deserialized by jupyter_client (signature
checked, JSON parsed, dates extracted) through get_iopub_msg; each
display_data is kept as an nbformat-shaped output dict, the least a client
that records outputs does. CPU is resource.getrusage(RUSAGE_SELF) around the
execution (this process, all threads; the kernel is another process).
"""
import sys

import benchlib


def main():
    conn, msgs = sys.argv[1], int(sys.argv[2])
    hwm = sys.argv[3] if len(sys.argv) > 3 else "unlimited"
    kc = benchlib.blocking_client(conn, unlimited_hwm=(hwm == "unlimited"))
    code = ("from IPython.display import display\n"
            "for i in range(%d): display({'text/plain': str(i)}, raw=True)" % msgs)
    counts = {"iopub": 0, "display": 0}
    outputs = []

    def on_iopub(m):
        counts["iopub"] += 1
        if m["msg_type"] == "display_data":
            counts["display"] += 1
            c = m["content"]
            outputs.append({"output_type": "display_data", "data": c["data"],
                            "metadata": c["metadata"]})

    u0, s0 = benchlib.cpu_us()
    t0 = benchlib.now_us()
    msg_id = kc.execute(code)
    reply, saw_idle = benchlib.wait_done(kc, msg_id, on_iopub=on_iopub, timeout=300, quiet=5)
    t1 = benchlib.now_us()
    u1, s1 = benchlib.cpu_us()
    if not saw_idle:  # lost messages, the idle among them: don't bill the wait
        t1 -= 5 * 1000000
    kc.stop_channels()
    benchlib.emit({
        "client": "jupyter_client %s BlockingKernelClient" % __import__("jupyter_client").__version__,
        "messages_requested": msgs,
        "wall_us": t1 - t0,
        "cpu_user_us": u1 - u0,
        "cpu_sys_us": s1 - s0,
        "iopub_msgs": counts["iopub"],
        "display_data": counts["display"],
        "outputs_stored": len(outputs),
        "status": reply["content"]["status"],
        "saw_idle": saw_idle,
        "rcvhwm": hwm,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
