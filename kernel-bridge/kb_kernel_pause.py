# Run in an ipykernel before and after a memory pause (kb_kernel_pause.c):
# gVisor cannot save a TCP socket, and ipykernel's IOPub "pipe" (for the
# output of forked children) is one, listening on 127.0.0.1.


def _ja_pause():
    """Close the IOPub pipe on its own thread, then wait (up to 2 s) for
    the box to hold no TCP socket; answer those left ("" when none)."""
    import threading
    import time
    from IPython import get_ipython

    io = get_ipython().kernel.iopub_thread
    done = threading.Event()

    def close():
        s = getattr(io, '_pipe_in', None)
        if s is not None:
            s.close(linger=0)
            io._pipe_in = None
        done.set()

    io.io_loop.add_callback(close)
    done.wait(5)
    left = []
    for _ in range(100):
        left = []
        for f in ('/proc/net/tcp', '/proc/net/tcp6'):
            try:
                left += [ln.split()[1] for ln in open(f).readlines()[1:]]
            except OSError:
                pass
        if not left:
            break
        time.sleep(0.02)
    return ' '.join(left)


def _ja_resume():
    """Open the IOPub pipe again after the restore."""
    from IPython import get_ipython

    io = get_ipython().kernel.iopub_thread
    if io._pipe_flag and getattr(io, '_pipe_in', None) is None:
        io.io_loop.add_callback(io._setup_pipe_in)
    return ''
