"""kb_output stores what nbclient 0.7 stores.

A real ipykernel runs a small notebook under nbclient; every iopub message
nbclient processes is recorded, replayed through kb_output (the C unit-test
binary's replay mode, one shared display registry), and the final outputs of
every cell are compared with nbclient's as they are (one stream output per
message, as nbclient 0.7 keeps them), and with kb_output's merging on
against nbconvert's coalesce_streams. Everything stays on loopback.
"""
import copy
import json
import os
import subprocess

import nbformat
import pytest
from nbclient import NotebookClient


def _replay_bin():
    agent = os.environ.get("JUPYTER_AGENT_BIN", "build/jupyter-agent")
    path = os.path.join(os.path.dirname(agent), "tests", "unit", "kb_output")
    if not os.access(path, os.X_OK):
        pytest.skip("kb_output test binary not built at %s" % path)
    return path


CELLS = [
    # interleaved streams, a display with an id, an execute_result
    "import sys\nfrom IPython.display import display, clear_output\n"
    "print('a', flush=True); print('b', file=sys.stderr, flush=True)\n"
    "print('c', flush=True)\n"
    "h = display('v1', display_id=True)\n42",
    # updates of an earlier cell's display, and a re-display of the same id
    "h.update('v2')\ndisplay('v3', display_id=h.display_id)\nprint('x')",
    # a clear_output(wait=True) progress loop
    "for i in range(5):\n    clear_output(wait=True)\n    print(i, 'done')",
    # immediate clear, then a rich display and an error
    "print('gone'); clear_output()\n"
    "from IPython.display import HTML\ndisplay(HTML('<b>hi</b>'))\n"
    "raise ValueError('boom')",
    # flushed prints: one stream message each, kept apart by nbclient 0.7
    "import sys, time\nfor i in range(3):\n"
        "    sys.stdout.write('%d\\n' % i); sys.stdout.flush()\n"
    "    time.sleep(0.05)",
]


class RecordingClient(NotebookClient):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.recorded = {}

    def process_message(self, msg, cell, cell_index):
        self.recorded.setdefault(cell_index, []).append(
            [msg["msg_type"], copy.deepcopy(msg["content"])]
        )
        return super().process_message(msg, cell, cell_index)


def test_kb_output_matches_nbclient(tmp_path):
    binary = _replay_bin()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    client = RecordingClient(
        nb, timeout=60, kernel_name="python3", allow_errors=True
    )
    client.execute()

    execs = [client.recorded.get(i, []) for i in range(len(CELLS))]
    msgs = tmp_path / "msgs.json"
    msgs.write_text(json.dumps(execs))
    ours = json.loads(
        subprocess.run(
            [binary, str(msgs)], check=True, capture_output=True, text=True
        ).stdout
    )

    theirs = [json.loads(json.dumps(c.outputs)) for c in nb.cells]
    assert len(ours) == len(theirs)
    for i, (mine, ref) in enumerate(zip(ours, theirs)):
        assert mine == ref, "cell %d differs" % i

    # the cases the cells were written for really happened
    kinds = [o["output_type"] for o in theirs[0]]
    assert kinds[-2:] == ["display_data", "execute_result"]
    assert {o["name"] for o in theirs[0] if o["output_type"] == "stream"} == {
        "stdout", "stderr"}
    assert theirs[0][3]["data"]["text/plain"] == "'v3'"  # updated by cell 2
    assert theirs[2] == [
        {"output_type": "stream", "name": "stdout", "text": "4 done\n"}]
    assert theirs[3][-1]["output_type"] == "error"
    assert [o["text"] for o in theirs[4]] == ["0\n", "1\n", "2\n"]

    # and what kb_output stores is valid nbformat
    for cell, outputs in zip(nb.cells, ours):
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nbformat.validate(nb)


def test_kb_output_merged_matches_nbconvert_coalesce_streams(tmp_path):
    """With merging on, kb_output stores what nbconvert's coalesce_streams
    makes of nbclient's outputs."""
    from nbconvert.preprocessors import coalesce_streams
    binary = _replay_bin()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    client = RecordingClient(
        nb, timeout=60, kernel_name="python3", allow_errors=True
    )
    client.execute()
    msgs = tmp_path / "msgs.json"
    msgs.write_text(json.dumps(
        [client.recorded.get(i, []) for i in range(len(CELLS))]))
    ours = json.loads(subprocess.run(
        [binary, str(msgs), "--merge-streams"], check=True,
        capture_output=True, text=True).stdout)
    merged, _ = coalesce_streams(copy.deepcopy(nb), {})
    theirs = [json.loads(json.dumps(c.outputs)) for c in merged.cells]
    assert ours == theirs
    assert len(nb.cells[4].outputs) == 3 and len(theirs[4]) == 1
