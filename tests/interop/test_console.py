"""The agent kernel in a real terminal frontend: Debian's `jupyter console`
(6.4) started with `--kernel NAME` inside a detached tmux session, typed at
with send-keys and read back with capture-pane (the screen a user sees, not
a byte stream full of escape codes).

The banner appears; a plain request is answered through the scripted fake
LLM (the model's code is shown, its chart reaches the console's image
handler as a PNG, the answer is Out[1]); a two-line %%python cell works
through the kernel's is_complete answers (`%%python` alone asks for more
lines); typing exit leaves with status 0 and no kernel process is left.
"""
import os
import subprocess

import pytest

from frontend_helpers import (ANSWER, CHART_CODE, KERNEL_NAME, REQUEST,
                              JupyterEnv, answer, code, user_messages,
                              wait_until)

CONSOLE = "/usr/bin/jupyter-console"
TMUX = "/usr/bin/tmux"


class Terminal:
    """One tmux session, 140x50, on a private server socket."""

    def __init__(self, sock, env, command):
        self.sock, self.env = sock, env
        r = self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t",
                      "-x", "140", "-y", "50", command)
        assert r.returncode == 0, r.stderr

    def tmux(self, *args):
        return subprocess.run([TMUX, "-S", self.sock, *args], env=self.env,
                              capture_output=True, text=True, timeout=30)

    def screen(self):
        """The whole pane, scrollback included, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-",
                         "-t", "t").stdout

    def type(self, text):
        self.tmux("send-keys", "-t", "t", "-l", text)
        self.tmux("send-keys", "-t", "t", "Enter")

    def key(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, text, seconds=90, after=0):
        """Wait until text shows on screen (past character offset after);
        fail with the screen if it does not."""
        if not wait_until(lambda: text in self.screen()[after:], seconds):
            pytest.fail(f"{text!r} never showed on screen:\n{self.screen()}")
        return self.screen().index(text, after)

    def close(self):
        self.tmux("kill-server")


def test_console_answers_plots_runs_python_and_exits_clean():
    for path, pkg in ((CONSOLE, "jupyter-console"), (TMUX, "tmux")):
        if not os.access(path, os.X_OK):
            pytest.skip(f"{path} is missing: install Debian's {pkg} "
                        "(tools/install-deps)")
    jenv = JupyterEnv([code("Plotting revenue by quarter.", CHART_CODE),
                       answer(ANSWER)])
    term = None
    try:
        # The console hands images to a program; ours saves the PNG (the
        # default would open a viewer through xdg-open).
        chart = os.path.join(jenv.root, "chart.png")
        config = os.path.join(jenv.root, "config")
        os.makedirs(config)
        with open(os.path.join(config, "jupyter_console_config.py"), "w") as f:
            f.write("c.ZMQTerminalInteractiveShell.image_handler = 'stream'\n"
                    "c.ZMQTerminalInteractiveShell.stream_image_handler = "
                    f"['/usr/bin/tee', {chart!r}]\n")
        env = jenv.env(TERM="xterm-256color")
        term = Terminal(os.path.join(jenv.root, "tmux.sock"), env,
                        f"{CONSOLE} --kernel {KERNEL_NAME}; "
                        "echo \"console exited $?\"; sleep 600")
        term.wait_for("In [1]:")
        banner = term.screen()
        assert "jupyter-agent" in banner and "%%python" in banner
        assert len(jenv.kernels()) == 1, jenv.kernels()

        term.type(REQUEST)
        at = term.wait_for("In [2]:", 120)
        screen = term.screen()
        # The model's code is shown, then its answer as Out[1].
        assert "revenue.plot.bar(" in screen[:at]
        assert "Out[1]: " + ANSWER in screen[:at]
        with open(chart, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"

        # `%%python` alone is incomplete: the console asks for more lines.
        term.type("%%python")
        term.wait_for("...:", after=at)
        term.type("print('python says', 6 * 7)")
        # A cell magic ends at a blank line, as IPython's check_complete
        # says: the console submits once the cell ends in an empty line
        # ("...\n\n"), which takes two Enters after the body.
        term.type("")
        term.type("")
        at3 = term.wait_for("In [3]:", after=at)
        lines = term.screen()[at:at3].splitlines()
        assert "python says 42" in lines

        reqs = jenv.llm.requests()
        assert len(reqs) == 2
        assert any(REQUEST in t for t in user_messages(reqs[:1]))

        # `exit` leaves as it does with IPython kernels (an ask_exit
        # payload), instead of being sent to the model as a request.
        term.type("exit")
        term.wait_for("console exited")
        assert len(jenv.llm.requests()) == 2, "exit was sent to the model"
        assert "console exited 0" in term.screen()
        assert wait_until(lambda: jenv.kernel_pids() == [], 30), \
            f"kernel processes left after the console exited: " \
            f"{jenv.kernel_pids()}"
    finally:
        if term is not None:
            term.close()
        for pid in jenv.kernel_pids():
            os.kill(pid, 9)
        jenv.close()
