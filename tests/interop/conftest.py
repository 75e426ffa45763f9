"""Shared fixtures for the interop tests: where our binary is, and how to
normalise outputs so two runs of the same cell compare equal."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("JUPYTER_AGENT_BIN", os.path.join(ROOT, "build", "jupyter-agent"))

# Set JA_TEST_SANDBOX=0 to run the kernels without the sandbox.
SANDBOX_ARGS = [] if os.environ.get("JA_TEST_SANDBOX", "1") != "0" else ["--no-sandbox"]

_ADDR = re.compile(r"0x[0-9a-f]{6,16}")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELLNO = re.compile(r"(Cell In ?\[?)\d+(\]?, line)")


def normalise_text(s):
    s = _ADDR.sub("0xADDR", s)
    s = _ANSI.sub("", s)
    return _CELLNO.sub(r"\1N\2", s)


def coalesce_streams(outputs):
    out = []
    for o in outputs:
        if (o.get("output_type") == "stream" and out
                and out[-1].get("output_type") == "stream"
                and out[-1]["name"] == o["name"]):
            out[-1] = dict(out[-1], text=out[-1]["text"] + o["text"])
        else:
            out.append(dict(o))
    return out


def normalise_outputs(outputs):
    """Drop what legitimately differs between two runs: execution counts,
    memory addresses, ANSI colours, PNG bytes (compared by signature),
    and the chart and table data jupyter-agent adds (docs/outputs.md).
    Stream outputs stay as they are: one per message, as nbclient 0.7
    stores them (coalesce_streams() first to compare merged ones)."""
    result = []
    for o in outputs:
        o = dict(o)
        o.pop("execution_count", None)
        if "text" in o:
            t = o["text"]
            o["text"] = normalise_text("".join(t) if isinstance(t, list) else t)
        if "traceback" in o:
            o["traceback"] = [normalise_text(line) for line in o["traceback"]]
        if "data" in o:
            data = {}
            for mime, v in o["data"].items():
                if mime.startswith("application/vnd.jupyter-agent."):
                    continue  # our chart/table data (docs/outputs.md)
                if isinstance(v, list):
                    v = "".join(v)
                if mime.startswith("image/"):
                    v = v[:16]  # the PNG signature and IHDR start
                elif isinstance(v, str):
                    v = normalise_text(v)
                data[mime] = v
            o["data"] = data
        result.append(o)
    return result


@pytest.fixture(scope="session")
def agent_bin():
    if not os.access(BIN, os.X_OK):
        pytest.fail(f"{BIN} is not built; run make first")
    return BIN


def run_agent(*args, input=None, timeout=180, env=None):
    return subprocess.run([BIN, *args], input=input, capture_output=True,
                          text=True, timeout=timeout, env=env)
