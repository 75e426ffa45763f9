"""`exec --events` (docs/commands.md#exec): one JSON object per line per
output as it arrives, ending with the object `exec --json` prints, against
real sandboxed kernels.

Flushing is checked without timing: the cell prints, then waits on input(),
and the test answers only once it has read the first stream line, so an
output held back until the cell ends would hang the cell (and fail here).
"""
import json
import subprocess

from conftest import BIN, SANDBOX_ARGS

CODE = """print('first', flush=True)
input('go? ')
print('second')
from IPython.display import HTML, display
display(HTML('<b>bold</b>'))
6 * 7"""


def events(proc):
    for line in proc.stdout:
        yield json.loads(line)


def test_events_stream_as_they_come_and_end_with_the_json_object():
    proc = subprocess.Popen([BIN, "exec", *SANDBOX_ARGS, "--events", "-c",
                             CODE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    seen = []
    try:
        for ev in events(proc):
            seen.append(ev)
            if ev.get("event") == "stream" and ev["text"] == "first\n":
                # Only now may the cell go on: the line came before the end.
                proc.stdin.write("yes\n")
                proc.stdin.flush()
                proc.stdin.close()
        assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    kinds = [e.get("event") for e in seen]
    assert kinds == ["status", "stream", "stream", "display_data",
                     "execute_result", "status", None], kinds
    assert seen[0]["execution_state"] == "busy"
    assert seen[5]["execution_state"] == "idle"
    assert [e["text"] for e in seen[1:3]] == ["first\n", "second\n"]
    assert seen[3]["mimes"] == ["text/plain", "text/html"]
    assert seen[3]["data"]["text/html"] == "<b>bold</b>"
    assert seen[4]["data"]["text/plain"] == "42"
    assert seen[4]["execution_count"] == 1
    summary = seen[-1]
    assert set(summary) == {"status", "execution_count", "outputs",
                            "duration_ms"}, summary
    assert summary["status"] == "ok"
    assert [o["output_type"] for o in summary["outputs"]] == [
        "stream", "stream", "display_data", "execute_result"]


def test_an_error_is_an_event_and_the_summary_says_error():
    r = subprocess.run([BIN, "exec", *SANDBOX_ARGS, "--events", "-c",
                        "print('before')\n1/0"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    seen = [json.loads(line) for line in r.stdout.splitlines()]
    kinds = [e.get("event") for e in seen]
    assert kinds == ["status", "stream", "error", "status", None], kinds
    assert seen[2]["ename"] == "ZeroDivisionError"
    assert isinstance(seen[2]["traceback"], list)
    assert seen[-1]["status"] == "error"
    assert seen[-1]["outputs"][-1]["ename"] == "ZeroDivisionError"
