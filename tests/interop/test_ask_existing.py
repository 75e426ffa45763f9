"""`jupyter-agent ask --existing CONN` with an explicit connection file: the
variables the agent creates live on in the user's own kernel (a plain
ipykernel that jupyter_client started), where the user reads them next.
(test_ask.py covers --existing without a file, picked from the runtime dir.)
"""
import os
import subprocess
import tempfile

from jupyter_client.manager import KernelManager

from conftest import BIN
from test_ask import FakeLLM, answer, code


def test_ask_existing_conn_leaves_its_variables_in_the_users_kernel():
    with tempfile.TemporaryDirectory(prefix="ja-existing-") as tmp:
        # An empty runtime dir: the explicit path is the only way in.
        runtime = os.path.join(tmp, "runtime")
        os.makedirs(runtime)
        conn = os.path.join(tmp, "elsewhere", "my-kernel.json")
        os.makedirs(os.path.dirname(conn))
        km = KernelManager(kernel_name="python3")
        km.connection_file = conn
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            srv = FakeLLM([code("", "answer = 42"),
                           answer("`answer` is set to 42.")], tmp)
            try:
                r = subprocess.run(
                    [BIN, "ask", "--existing", conn, "--model",
                     "openai:test-model", "-o", os.path.join(tmp, "s.ipynb"),
                     "Set answer to 42"],
                    env=srv.env(JUPYTER_RUNTIME_DIR=runtime),
                    capture_output=True, text=True, timeout=120)
                reqs = srv.requests()
            finally:
                srv.stop()
            assert r.returncode == 0, r.stderr
            assert "`answer` is set to 42." in r.stdout
            assert len(reqs) == 2
            # The user's kernel, asked through its own client, has it.
            reply = kc.execute_interactive(
                "", timeout=30, user_expressions={
                    "value": "answer", "kind": "type(answer).__name__"})
            exprs = reply["content"]["user_expressions"]
            assert exprs["value"]["data"]["text/plain"] == "42"
            assert exprs["kind"]["data"]["text/plain"] == "'int'"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
