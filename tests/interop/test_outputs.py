"""Outputs are data first (docs/outputs.md), end to end through `ask`
against the fake LLM server and a real sandboxed kernel: the model's
request carries the chart's text form, the DataFrame's text table, a
copy of an oversized figure scaled down to fit, and a long print as head
and tail with a note; the notebook keeps the chart and table JSON, the
full-size image and the whole print, and validates with nbformat."""
import base64
import json
import os
import re
import struct
import tempfile

import nbformat
import pytest

from test_ask import FakeLLM, answer, ask, code, read_nb

CELL = """import pandas as pd, matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(30, 20), dpi=100)
ax.bar(['north', 'south', 'east'], [17, 42, 23])
ax.set_title('Revenue by region'); ax.set_ylabel('USD (k)')
plt.show()
print('head-marker ' + 'x' * 100000 + ' tail-marker')
pd.DataFrame({'region': ['north', 'south', 'east'], 'usd': [17.5, 42, 23]})"""

CHART_TEXT = ("[bar chart 'Revenue by region', y: USD (k); north 17, "
              "south 42, east 23]")


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def tmp():
    with tempfile.TemporaryDirectory(prefix="ja-outputs-") as d:
        yield d


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_ask_request_carries_chart_table_fitted_image(tmp, provider):
    srv = FakeLLM([code("Charting.", CELL), answer("South leads.")], tmp)
    out = os.path.join(tmp, "s.ipynb")
    try:
        r = ask(["--model", provider + ":model-x", "-o", out,
                 "Which region sells most?"], srv.env())
        reqs = srv.requests()
    finally:
        srv.stop()
    assert r.returncode == 0, r.stderr
    body = json.dumps(reqs[1]["body"], ensure_ascii=False)
    # the chart and the table as text, next to the image
    assert json.dumps(CHART_TEXT)[1:-1] in body, body[:3000]
    assert "DataFrame: 3 rows × 2 columns" in body
    assert "region (object) | usd (float64)" in body
    # the long print: head and tail, and what was cut
    assert "head-marker" in body and "tail-marker" in body
    assert re.search(r"bytes omitted", body)
    assert "x" * 60000 not in body
    # the oversized figure reaches the model scaled down...
    b64s = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", body) + \
        re.findall(r'"data": "([A-Za-z0-9+/=]{200,})"', body)
    assert len(b64s) == 1, body[:2000]
    w, h = png_size(base64.b64decode(b64s[0]))
    assert max(w, h) <= 1568 and "scaled down to %dx%d" % (w, h) in body
    # ... and the notebook keeps it whole, with the chart and table JSON
    nb = read_nb(out)
    cell = [c for c in nb.cells if c.cell_type == "code"][0]
    figs = [o for o in cell.outputs if "image/png" in o.get("data", {})]
    fw, fh = png_size(base64.b64decode(figs[0].data["image/png"]))
    assert max(fw, fh) > 1568 and fw > w
    chart = figs[0].data["application/vnd.jupyter-agent.chart+json"]
    assert [e["value"] for e in chart["charts"][0]["elements"]] == [17, 42, 23]
    res = [o for o in cell.outputs if o.output_type == "execute_result"][0]
    table = res.data["application/vnd.jupyter-agent.table+json"]
    assert table["shape"] == [3, 2]
    text = "".join(o.get("text", "") for o in cell.outputs
                   if o.output_type == "stream")
    assert "x" * 100000 in text
    nbformat.validate(nb)
