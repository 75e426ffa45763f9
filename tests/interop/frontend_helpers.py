"""What the real-frontend tests (test_browser.py, test_console.py) share:
an isolated Jupyter environment with our kernelspec in a temp prefix, the
scripted fake LLM from test_ask.py, and a /proc scan for the kernel
processes a frontend started."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from conftest import BIN, SANDBOX_ARGS
from test_ask import FakeLLM, answer, code  # noqa: F401 (re-exported)

KERNEL_NAME = "agent-frontend-test"

# A request, the Python the scripted model runs for it, and its answer.
REQUEST = "Plot the revenue by quarter"
CHART_CODE = """import pandas as pd
import matplotlib.pyplot as plt

revenue = pd.DataFrame({"quarter": ["Q1", "Q2", "Q3", "Q4"],
                        "revenue": [1.82, 2.05, 1.94, 2.41]})
ax = revenue.plot.bar(x="quarter", y="revenue", legend=False, rot=0,
                      color="#4C72B0", figsize=(7, 3.2))
ax.set_ylabel("Revenue (millions)")
ax.set_title("Revenue by quarter, 2026")
plt.tight_layout()
plt.show()"""
ANSWER = ("Revenue grew from **1.82M** in Q1 to **2.41M** in Q4 (+32%). "
          "Q3 dipped 5% below Q2 before the year-end rebound.")
ANSWER_PLAIN = "Q3 dipped 5% below Q2 before the year-end rebound."


class JupyterEnv:
    """A temp directory holding our kernelspec (prefix/share/jupyter) and
    Jupyter's config, data and runtime dirs, plus the fake LLM: env() is
    what a frontend process needs to start our kernel against it, and
    nothing from the user's own Jupyter setup is visible."""

    def __init__(self, script):
        self.root = tempfile.mkdtemp(prefix="ja-frontend-")
        self.prefix = os.path.join(self.root, "prefix")
        self.runtime = os.path.join(self.root, "runtime")
        self.work = os.path.join(self.root, "work")
        os.makedirs(self.work)
        out = subprocess.run([BIN, "kernelspec", "install", "--prefix",
                              self.prefix, "--name", KERNEL_NAME, "--",
                              *SANDBOX_ARGS],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        self.llm = FakeLLM(script, self.root)

    def env(self, **extra):
        env = self.llm.env(
            JUPYTER_AGENT_MODEL="openai:test-model",
            JUPYTER_PATH=os.path.join(self.prefix, "share", "jupyter"),
            JUPYTER_CONFIG_DIR=os.path.join(self.root, "config"),
            JUPYTER_DATA_DIR=os.path.join(self.root, "data"),
            JUPYTER_RUNTIME_DIR=self.runtime,
            IPYTHONDIR=os.path.join(self.root, "ipython"),
        )
        env.update(extra)
        return env

    def kernel_pids(self):
        """Our kernel processes whose connection file is in our runtime
        dir, i.e. the ones this test's frontend started (a kernel and the
        child it forks to supervise its sandbox both count)."""
        return [pid for pid, _ in agent_kernels(self.runtime)]

    def kernels(self):
        """The kernels proper: those pids whose parent is not one of ours."""
        found = agent_kernels(self.runtime)
        pids = {pid for pid, _ in found}
        return [pid for pid, ppid in found if ppid not in pids]

    def close(self):
        self.llm.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def agent_kernels(runtime):
    """[(pid, ppid)] of live `jupyter-agent kernel` processes of our binary
    with a connection file under runtime."""
    pids = []
    real = os.path.realpath(BIN)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
            if state == "Z":
                continue
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in argv if a]
        if (len(argv) >= 2 and os.path.realpath(argv[0]) == real
                and argv[1] == "kernel"
                and any(a.startswith(runtime + "/") for a in argv)):
            pids.append((int(entry), int(ppid)))
    return pids


def wait_until(cond, seconds=30):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def user_messages(requests):
    """The text of every user message the fake LLM received, in order."""
    texts = []
    for r in requests:
        for m in r["body"].get("messages", []):
            if m.get("role") == "user":
                c = m.get("content")
                texts.append(c if isinstance(c, str) else json.dumps(c))
    return texts
