"""jupyter-agent as a Jupyter kernel, driven by the Jupyter ecosystem's own
client (jupyter_client) and its conformance suite (jupyter_kernel_test).

The kernelspec is installed with `jupyter-agent kernelspec install --prefix`
into a temporary directory put on JUPYTER_PATH, so nothing outside the test
changes. Provider variables are removed from the kernel's environment, so a
plain (non-%%python) cell must answer with the "no provider" error.
"""
import json
import os
import queue
import shutil
import subprocess
import tempfile
import time
import unittest

import pytest
import zmq
from jupyter_client.manager import KernelManager
from jupyter_client.session import Session

import jupyter_kernel_test

from conftest import BIN, SANDBOX_ARGS

TIMEOUT = 60
PROVIDER_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                 "ANTHROPIC_BASE_URL", "JUPYTER_AGENT_MODEL")


def install_spec(prefix):
    """Install our kernelspec under prefix and make Jupyter look there."""
    out = subprocess.run([BIN, "kernelspec", "install", "--prefix", prefix,
                          "--", *SANDBOX_ARGS],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    os.environ["JUPYTER_PATH"] = os.path.join(prefix, "share", "jupyter")
    for var in PROVIDER_VARS:
        os.environ.pop(var, None)
    return out.stdout


@pytest.fixture(scope="module")
def spec_prefix():
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", *PROVIDER_VARS)}
    prefix = tempfile.mkdtemp(prefix="ja-kernelspec-")
    install_spec(prefix)
    yield prefix
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(prefix, ignore_errors=True)


@pytest.fixture
def kernel(spec_prefix):
    km = KernelManager(kernel_name="agent")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    yield km, kc
    kc.stop_channels()
    if km.is_alive():
        km.shutdown_kernel(now=True)


def run(kc, code, **kw):
    """Execute and collect (reply, [(msg_type, content), ...])."""
    outputs = []

    def hook(msg):
        if msg["msg_type"] not in ("status", "execute_input"):
            outputs.append((msg["msg_type"], msg["content"]))

    reply = kc.execute_interactive(code, output_hook=hook, timeout=TIMEOUT,
                                   **kw)
    return reply["content"], outputs


def children(pid):
    """Pids of the direct children of pid (from /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            kids.append(int(entry))
    return kids


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state == "Z"
    except OSError:
        return True


def wait_until(cond, seconds=30):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_kernelspec_is_listed_by_jupyter(spec_prefix):
    spec = json.load(open(os.path.join(
        spec_prefix, "share", "jupyter", "kernels", "agent", "kernel.json")))
    assert spec["argv"][:4] == [os.path.realpath(BIN), "kernel", "-f",
                                "{connection_file}"]
    assert spec["interrupt_mode"] == "message"
    assert spec["language"] == "markdown"
    jupyter = shutil.which("jupyter", path="/usr/bin")
    if jupyter is None:
        pytest.skip("/usr/bin/jupyter is not installed (Debian jupyter-core)")
    listed = subprocess.run([jupyter, "kernelspec", "list", "--json"],
                            capture_output=True, text=True, timeout=30)
    specs = json.loads(listed.stdout)["kernelspecs"]
    assert "agent" in specs
    for size in ("32x32", "64x64"):
        with open(os.path.join(specs["agent"]["resource_dir"],
                               f"logo-{size}.png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_kernelspec_uninstall_removes_it(spec_prefix):
    prefix = tempfile.mkdtemp(prefix="ja-kernelspec-rm-")
    try:
        subprocess.run([BIN, "kernelspec", "install", "--prefix", prefix,
                        "--name", "agent-rm"], check=True,
                       capture_output=True, timeout=30)
        kdir = os.path.join(prefix, "share", "jupyter", "kernels", "agent-rm")
        assert os.path.exists(os.path.join(kdir, "kernel.json"))
        out = subprocess.run([BIN, "kernelspec", "uninstall", "--prefix",
                              prefix, "--name", "agent-rm"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert not os.path.exists(kdir)
        again = subprocess.run([BIN, "kernelspec", "uninstall", "--prefix",
                                prefix, "--name", "agent-rm"],
                               capture_output=True, text=True, timeout=30)
        assert again.returncode == 2 and "no kernelspec" in again.stderr
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def test_kernel_info_names_the_agent(kernel):
    km, kc = kernel
    kc.kernel_info()
    reply = kc.get_shell_msg(timeout=TIMEOUT)["content"]
    assert reply["status"] == "ok"
    assert reply["implementation"] == "jupyter-agent"
    assert reply["protocol_version"] == "5.3"
    assert reply["language_info"]["name"] == "markdown"
    assert reply["language_info"]["file_extension"] == ".md"
    assert "%%python" in reply["banner"]


def test_python_cell_streams_and_plots(kernel):
    km, kc = kernel
    reply, outs = run(kc, "%%python\n"
                          "print('hello from python')\n"
                          "import matplotlib.pyplot as plt\n"
                          "plt.plot([1, 2, 3], [3, 1, 2])\n"
                          "plt.show()")
    assert reply["status"] == "ok"
    streams = "".join(c["text"] for t, c in outs if t == "stream")
    assert "hello from python" in streams
    pngs = [c for t, c in outs
            if t == "display_data" and "image/png" in c["data"]]
    assert len(pngs) == 1
    assert pngs[0]["data"]["image/png"].startswith("iVBORw0KGgo")


def test_execute_result_carries_our_execution_count(kernel):
    km, kc = kernel
    run(kc, "%%python\nx = 41")
    reply, outs = run(kc, "%%python\nx + 1")
    results = [c for t, c in outs if t == "execute_result"]
    assert len(results) == 1
    assert results[0]["data"]["text/plain"] == "42"
    assert results[0]["execution_count"] == reply["execution_count"] == 2


def counts(kc, code, store_history):
    """(execute_input count, execute_result count, reply count) of one
    request, as the iopub and shell channels report them."""
    seen = {}

    def hook(msg):
        if msg["msg_type"] in ("execute_input", "execute_result"):
            seen[msg["msg_type"]] = msg["content"]["execution_count"]

    reply = kc.execute_interactive(code, output_hook=hook, timeout=TIMEOUT,
                                   store_history=store_history)
    return (seen.get("execute_input"), seen.get("execute_result"),
            reply["content"]["execution_count"])


def test_store_history_false_keeps_counts_as_ipykernel_does(kernel):
    """A request with store_history=False does not take a number: the
    counts match a real python3 ipykernel given the same requests."""
    km, kc = kernel
    steps = [("1", True), ("2", False), ("3", True), ("4", False)]
    ours = [counts(kc, "%%python\n" + c, h) for c, h in steps]
    py = KernelManager(kernel_name="python3")
    py.start_kernel()
    pc = py.client()
    pc.start_channels()
    try:
        pc.wait_for_ready(timeout=TIMEOUT)
        theirs = [counts(pc, c, h) for c, h in steps]
    finally:
        pc.stop_channels()
        py.shutdown_kernel(now=True)
    assert [t[2] for t in theirs] == [1, 1, 2, 2]  # the premise
    assert ours == theirs


def test_blank_lines_before_the_python_magic_still_run_python(kernel):
    """IPython drops leading blank lines before looking for a cell magic;
    so do we (the cell must not go to the model, which has no provider
    here and would fail)."""
    km, kc = kernel
    reply, outs = run(kc, "\n  \n%%python\nprint('still python')")
    assert reply["status"] == "ok", reply
    assert "".join(c.get("text", "") for t, c in outs
                   if t == "stream") == "still python\n"


def test_python_input_round_trip(kernel):
    km, kc = kernel

    def answer(msg):
        assert msg["content"]["prompt"] == "name? "
        kc.input("Ada")

    reply, outs = run(kc, "%%python\nn = input('name? ')\nprint('hi', n)",
                      allow_stdin=True, stdin_hook=answer)
    assert reply["status"] == "ok"
    assert "hi Ada" in "".join(c["text"] for t, c in outs if t == "stream")


def test_interrupt_stops_a_long_python_cell(kernel):
    km, kc = kernel
    run(kc, "%%python\nprint('warm')")  # the inner session is up
    msg_id = kc.execute("%%python\nimport time\nprint('sleeping', flush=True)"
                        "\ntime.sleep(60)")
    # Wait until the inner code runs, then interrupt by message.
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if (msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "stream"):
            break
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    reply, outs = run(kc, "%%python\nprint('still serving')")
    assert reply["status"] == "ok"
    assert "still serving" in outs[0][1]["text"]


def test_plain_cell_without_provider_says_what_to_set(kernel):
    km, kc = kernel
    reply, outs = run(kc, "Summarise the quarterly numbers, please.")
    assert reply["status"] == "error"
    errors = [c for t, c in outs if t == "error"]
    assert len(errors) == 1
    assert errors[0]["evalue"].startswith("no LLM provider configured")
    assert "OPENAI_API_KEY" in errors[0]["evalue"]
    reply, outs = run(kc, "%%python\nprint(1 + 1)")
    assert reply["status"] == "ok"


def test_reset_starts_a_fresh_session(kernel):
    km, kc = kernel
    run(kc, "%%python\nsecret = 7")
    reply, outs = run(kc, "%reset")
    assert reply["status"] == "ok"
    reply, outs = run(kc, "%%python\nsecret")
    assert reply["status"] == "error"
    assert reply["ename"] == "NameError"


def test_completion_inspection_and_is_complete_reach_python(kernel):
    km, kc = kernel
    code = "%%python\nimport collections\ncollections.Ord"
    kc.complete(code)
    reply = kc.get_shell_msg(timeout=TIMEOUT)["content"]
    assert "collections.OrderedDict" in reply["matches"] or \
        "OrderedDict" in reply["matches"]
    # Cursor positions refer to the whole cell, magic line included.
    assert reply["cursor_end"] == len(code)
    assert code.index("collections.Ord") <= reply["cursor_start"] < len(code)

    kc.complete("%%py")
    reply = kc.get_shell_msg(timeout=TIMEOUT)["content"]
    assert reply["matches"] == ["%%python"] and reply["cursor_start"] == 0

    kc.inspect("%%python\nlen", cursor_pos=len("%%python\nlen"))
    reply = kc.get_shell_msg(timeout=TIMEOUT)["content"]
    assert reply["found"] and "text/plain" in reply["data"]

    # A cell magic ends at a blank line, as IPython (ipykernel) says:
    # "%%python\nimport time" is incomplete, so that jupyter console does
    # not submit it after its first body line.
    from IPython.core.inputtransformer2 import TransformerManager
    tm = TransformerManager()
    for code in ["%%python\nfor i in range(3):", "%%python\nprint(1)",
                 "%%python\nimport time", "%%python\nimport time\n",
                 "%%python\nimport time\n\n", "%%python\nif x:\n    y = 1",
                 "%%python\nprint(1)\n   ", "%%python", "%%python\n",
                 "\n%%python\nx = 1\n\n"]:
        status, indent = tm.check_complete(code)
        kc.is_complete(code)
        reply = kc.get_shell_msg(timeout=TIMEOUT)["content"]
        assert reply["status"] == status, code
        if status == "incomplete":
            assert reply["indent"] == " " * (indent or 0), code
    kc.is_complete("plot revenue by month")
    reply = kc.get_shell_msg(timeout=TIMEOUT)["content"]
    assert reply["status"] == "complete"


def test_badly_signed_message_is_dropped(kernel):
    km, kc = kernel
    info = km.get_connection_info()
    forger = Session(key=b"not-the-key", signature_scheme="hmac-sha256")
    honest = Session(key=info["key"], signature_scheme="hmac-sha256")
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(f"tcp://{info['ip']}:{info['shell_port']}")
    try:
        forger.send(sock, "kernel_info_request", {})
        assert sock.poll(2000) == 0, "a forged request was answered"
        honest.send(sock, "kernel_info_request", {})
        assert sock.poll(TIMEOUT * 1000), "the kernel stopped serving"
        idents, msg = honest.feed_identities(sock.recv_multipart())
        reply = honest.deserialize(msg)
        assert reply["msg_type"] == "kernel_info_reply"
    finally:
        sock.close()


def test_heartbeat_answers_during_a_long_cell(kernel):
    km, kc = kernel
    run(kc, "%%python\nprint('warm')")
    kc.execute("%%python\nimport time\ntime.sleep(5)")
    info = km.get_connection_info()
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.linger = 0
    sock.connect(f"tcp://{info['ip']}:{info['hb_port']}")
    try:
        time.sleep(0.5)  # the cell is running now
        sock.send(b"ping")
        assert sock.poll(3000), "no heartbeat while busy"
        assert sock.recv() == b"ping"
    finally:
        sock.close()
    assert kc.get_shell_msg(timeout=TIMEOUT)["content"]["status"] == "ok"


def test_shutdown_leaves_no_process_behind(kernel):
    km, kc = kernel
    run(kc, "%%python\nprint('up')")
    pid = km.provisioner.pid if hasattr(km.provisioner, "pid") else \
        km.provisioner.process.pid
    inner = children(pid)
    assert inner, "the inner Python session should be a child of the kernel"
    kc.shutdown()
    reply = kc.get_control_msg(timeout=TIMEOUT) \
        if hasattr(kc, "get_control_msg") else None
    if reply is not None:
        assert reply["content"]["status"] == "ok"
    # It exits by itself (no kill from the manager needed) ...
    assert wait_until(lambda: not km.is_alive(), 30)
    km.shutdown_kernel(now=True)  # reaps it
    # ... and takes the inner kernel with it.
    for p in inner:
        assert wait_until(lambda: gone(p), 30), f"process {p} survived"


class AgentKernelConformance(jupyter_kernel_test.KernelTests):
    """The jupyter_kernel_test suite, with every sample our behaviour
    supports. Python runs in %%python cells; plain text goes to the agent."""

    kernel_name = "agent"
    language_name = "markdown"
    file_extension = ".md"

    code_hello_world = "%%python\nprint('hello, world')"
    code_stderr = "%%python\nimport sys\nprint('oops', file=sys.stderr)"
    completion_samples = [
        {"text": "%%py", "matches": {"%%python"}},
        {"text": "%%python\nimport collections\ncollections.OrderedDi",
         "matches": {"OrderedDict"}},
    ]
    # A cell magic ends at a blank line, as IPython says for every cell
    # magic (so it never calls one "invalid" either).
    complete_code_samples = ["%%python\n1\n\n", "%%python\nprint('x')\n\n",
                             "what is in sales.csv?", "%reset"]
    incomplete_code_samples = ["%%python\nfor i in range(3):",
                               "%%python\ndef f(x):", "%%python",
                               "%%python\nimport time"]
    invalid_code_samples = []
    code_generate_error = "%%python\nraise ValueError('boom')"
    code_execute_result = [
        {"code": "%%python\n6*7", "result": "42"},
        {"code": "%%python\n'ab' * 2", "result": "'abab'"},
    ]
    code_display_data = [
        {"code": "%%python\nfrom IPython.display import HTML, display\n"
                 "display(HTML('<b>hi</b>'))", "mime": "text/html"},
        {"code": "%%python\nimport matplotlib.pyplot as plt\n"
                 "plt.plot([1, 2]); plt.show()", "mime": "image/png"},
    ]
    code_history_pattern = "*6[*]7"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "%%python\nprint"
    code_page_something = "%%python\nprint?"
    code_clear_output = ("%%python\nfrom IPython.display import clear_output\n"
                         "clear_output()")

    @classmethod
    def setUpClass(cls):
        cls._saved = {k: os.environ.get(k)
                      for k in ("JUPYTER_PATH", *PROVIDER_VARS)}
        cls._prefix = tempfile.mkdtemp(prefix="ja-kernelspec-kt-")
        install_spec(cls._prefix)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        for k, v in cls._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(cls._prefix, ignore_errors=True)

    def test_plain_text_goes_to_the_agent(self):
        self.flush_channels()
        reply, output_msgs = self.execute_helper("hello agent")
        self.assertEqual(reply["content"]["status"], "error")
        self.assertEqual([m["msg_type"] for m in output_msgs], ["error"])


def test_kernel_exits_when_its_manager_dies(spec_prefix):
    """A manager killed without shutting the kernel down (JPY_PARENT_PID
    gone) must not leave the kernel, or its Python session, running."""
    script = (
        "import os, sys\n"
        "from jupyter_client.manager import KernelManager\n"
        "km = KernelManager(kernel_name='agent')\n"
        "km.start_kernel()\n"
        "kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=60)\n"
        "kc.execute_interactive('%%python\\nprint(1)', timeout=60,\n"
        "                       output_hook=lambda m: None)\n"
        "open(sys.argv[1], 'w').write(str(km.provisioner.pid))\n"
        "os._exit(0)\n")
    with tempfile.NamedTemporaryFile("r") as pidfile:
        # The kernel inherits the manager's stdout: not a pipe we wait on.
        out = subprocess.run(["/usr/bin/python3", "-c", script, pidfile.name],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, timeout=120)
        assert out.returncode == 0
        pid = int(pidfile.read())
    inner = children(pid)
    assert wait_until(lambda: gone(pid), 30), "the orphaned kernel survived"
    for p in inner:
        assert wait_until(lambda: gone(p), 30), f"process {p} survived"


def test_killed_kernel_takes_its_session_along(kernel):
    """SIGKILL gives the kernel no chance to clean up: the Python session
    must still die with it (parent-death signal)."""
    km, kc = kernel
    run(kc, "%%python\nprint('up')")
    pid = km.provisioner.pid
    inner = children(pid)
    assert inner
    km.shutdown_kernel(now=True)  # SIGKILL, no shutdown_request
    assert wait_until(lambda: gone(pid), 30)
    for p in inner:
        assert wait_until(lambda: gone(p), 30), f"process {p} survived"


def test_idle_session_is_stopped_and_the_next_cell_is_told(spec_prefix):
    """--idle-timeout: an idle inner sandbox is stopped (its processes are
    gone, resources freed), and the next cell starts a fresh one and says
    plainly that the state was lost."""
    prefix = tempfile.mkdtemp(prefix="ja-idle-")
    try:
        out = subprocess.run(
            [BIN, "kernelspec", "install", "--prefix", prefix, "--name",
             "agent-idle", "--", *SANDBOX_ARGS, "--idle-timeout", "2"],
            capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        km = KernelManager(kernel_name="agent-idle")
        km.kernel_spec_manager.kernel_dirs.insert(
            0, os.path.join(prefix, "share", "jupyter", "kernels"))
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=TIMEOUT)
            reply, _ = run(kc, "%%python\nkept = 1\nimport os\nos.getpid()")
            assert reply["status"] == "ok"
            pid = km.provisioner.pid
            assert wait_until(lambda: len(children(pid)) > 0, 10)
            # Idle past the limit: the sandbox goes away by itself.
            assert wait_until(lambda: not children(pid), 20), \
                "the idle session's sandbox is still running"
            reply, outs = run(kc, "%%python\nprint('kept' in dir())")
            assert reply["status"] == "ok"
            text = "".join(c.get("text", "") for t, c in outs if t == "stream")
            assert "stopped after 2 s idle" in text
            assert "False\n" in text
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def test_user_expressions_are_evaluated_and_returned_like_ipykernel(kernel):
    """A frontend's user_expressions reach the Python side and come back
    in the reply, shaped as a python3 ipykernel returns them."""
    km, kc = kernel
    exprs = {"answer": "6 * 7", "bad": "1 / 0"}
    reply, _ = run(kc, "%%python\nx = 41", user_expressions=exprs)
    assert reply["status"] == "ok", reply
    ours = reply["user_expressions"]
    py = KernelManager(kernel_name="python3")
    py.start_kernel()
    pc = py.client()
    pc.start_channels()
    try:
        pc.wait_for_ready(timeout=TIMEOUT)
        theirs = pc.execute_interactive(
            "x = 41", timeout=TIMEOUT,
            user_expressions=exprs)["content"]["user_expressions"]
    finally:
        pc.stop_channels()
        py.shutdown_kernel(now=True)
    assert theirs["answer"]["data"]["text/plain"] == "42"  # the premise
    assert ours["answer"] == theirs["answer"]
    assert ours["bad"]["status"] == theirs["bad"]["status"] == "error"
    assert ours["bad"]["ename"] == theirs["bad"]["ename"]
    # ... also after a cell that did not run in Python (a magic).
    reply, _ = run(kc, "%model", user_expressions={"x": "x + 1"})
    assert reply["status"] == "ok", reply
    assert reply["user_expressions"]["x"]["data"]["text/plain"] == "42"


def test_tracebacks_name_the_frontends_cell_number(kernel):
    """The Python side numbers cells by its own count; a traceback shown in
    the frontend names the cell as the frontend numbered it."""
    km, kc = kernel
    run(kc, "hello")  # answered by the agent: In[1] here, not in Python
    reply, outs = run(kc, "%%python\ndef f():\n    return 1 / 0\nf()")
    assert reply["status"] == "error"
    assert reply["execution_count"] == 2
    errors = [c for t, c in outs if t == "error"]
    tb = "\n".join(errors[0]["traceback"]).replace("In [", "In[")
    assert "In[2]" in tb and "In[1]" not in tb, tb
    assert "In[2]" in "\n".join(reply["traceback"]).replace("In [", "In[")


def test_history_survives_a_kernel_restart(spec_prefix, tmp_path):
    """As IPython keeps history.sqlite, the agent kernel keeps its history
    in the Jupyter data dir: after a restart, history_request sees the
    earlier session's cells."""
    saved = os.environ.get("JUPYTER_DATA_DIR")
    os.environ["JUPYTER_DATA_DIR"] = str(tmp_path)
    km = KernelManager(kernel_name="agent")
    try:
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=TIMEOUT)
        run(kc, "%%python\nremember_me = 1")
        km.restart_kernel(now=True)
        kc.wait_for_ready(timeout=TIMEOUT)
        run(kc, "%%python\nsecond = 2")
        msg_id = kc.history(hist_access_type="tail", n=10)
        reply = kc.get_shell_msg(timeout=TIMEOUT)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=TIMEOUT)
        hist = reply["content"]["history"]
        sources = [(s, line, src) for s, line, src in hist]
        assert (1, 1, "%%python\nremember_me = 1") in sources, sources
        assert (2, 1, "%%python\nsecond = 2") in sources, sources
        assert os.path.exists(tmp_path / "agent" / "history.jsonl")
        kc.stop_channels()
    finally:
        if km.is_alive():
            km.shutdown_kernel(now=True)
        if saved is None:
            os.environ.pop("JUPYTER_DATA_DIR", None)
        else:
            os.environ["JUPYTER_DATA_DIR"] = saved


def iopub_until_idle(kc, parent_id):
    """The iopub messages of request `parent_id`, up to its idle status."""
    got = []
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") != parent_id:
            continue
        if (msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            return got
        got.append(msg)


def comm_info(kc, target=None):
    msg_id = kc.comm_info(target_name=target)
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    return reply["content"]["comms"]


def send_comm(kc, msg_type, content):
    """What a frontend's widget manager sends (no reply; iopub answers)."""
    msg = kc.session.msg(msg_type, content)
    kc.shell_channel.send(msg)
    return iopub_until_idle(kc, msg["header"]["msg_id"])


def test_ipywidgets_comms_flow_both_ways(kernel):
    """A widget made in a %%python cell (Debian's python3-ipywidgets)
    opens its comm to the frontend through the agent kernel; the
    frontend's comm_info, state updates and comm_close reach the widget;
    the widget's own updates reach the frontend."""
    km, kc = kernel
    assert comm_info(kc) == {}  # no Python session yet: nothing open
    reply, outs = run(kc, "%%python\nimport ipywidgets as w\n"
                          "s = w.IntSlider(value=3)\ndisplay(s)")
    assert reply["status"] == "ok", reply
    opens = [c for t, c in outs if t == "comm_open"
             and c["target_name"] == "jupyter.widget"]
    assert opens, [t for t, _ in outs]
    # ipywidgets 6 (Debian 12) sends the state as the data itself, 7+
    # under "state".
    slider = [o for o in opens if o["data"].get("state", o["data"]).get(
        "_model_name") == "IntSliderModel"]
    assert slider, opens
    comm_id = slider[0]["comm_id"]
    # display(s): a view for the frontend, as display_data (7+) or as a
    # "display" comm message (6).
    views = [c["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
             for t, c in outs if t == "display_data" and
             "application/vnd.jupyter.widget-view+json" in c["data"]]
    views += [c["comm_id"] for t, c in outs if t == "comm_msg" and
              c["data"].get("method") == "display"]
    assert comm_id in views, outs

    assert comm_id in comm_info(kc, "jupyter.widget")

    # The frontend moves the slider (ipywidgets 6's protocol).
    send_comm(kc, "comm_msg", {"comm_id": comm_id, "data": {
        "method": "backbone", "sync_data": {"value": 7}}})
    _, outs = run(kc, "%%python\nprint(s.value)")
    assert "".join(c.get("text", "") for t, c in outs
                   if t == "stream") == "7\n"

    # The Python side changes it: the frontend hears of it.
    _, outs = run(kc, "%%python\ns.value = 9")
    updates = [c for t, c in outs if t == "comm_msg"
               and c["comm_id"] == comm_id]
    assert any(u["data"].get("state", {}).get("value") == 9
               for u in updates), updates

    # A state request from the frontend is answered on iopub.
    got = send_comm(kc, "comm_msg", {"comm_id": comm_id,
                                     "data": {"method": "request_state"}})
    assert any(m["msg_type"] == "comm_msg" and
               m["content"]["data"].get("state", {}).get("value") == 9
               for m in got), [m["msg_type"] for m in got]

    send_comm(kc, "comm_close", {"comm_id": comm_id, "data": {}})
    assert comm_id not in comm_info(kc, "jupyter.widget")


def test_model_magic_names_the_model_in_use(spec_prefix):
    """%model alone prints the model the next plain cell would use, also
    when it comes from the environment (issue 29: it printed where a model
    could come from, not which one)."""
    env = dict(os.environ, JUPYTER_AGENT_MODEL="openai:gpt-test-1",
               OPENAI_API_KEY="sk-test-not-used")
    km = KernelManager(kernel_name="agent")
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        reply, outs = run(kc, "%model")
        text = "".join(c.get("text", "") for t, c in outs if t == "stream")
        assert reply["status"] == "ok"
        assert "model: openai:gpt-test-1" in text, text
        reply, outs = run(kc, "%model openai:gpt-test-2")
        reply, outs = run(kc, "%model")
        text = "".join(c.get("text", "") for t, c in outs if t == "stream")
        assert "model: openai:gpt-test-2" in text, text
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
