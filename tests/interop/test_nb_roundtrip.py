"""notebook-io against nbformat itself.

Every notebook here is built with nbformat's own API (or written as raw JSON
where the point is an unusual layout), read and rewritten by our C writer
through build/tests/unit/test_nb_canonical --roundtrip, and compared byte for
byte with what nbformat.write() puts in a file for the same input:
nbformat.writes(nbformat.reads(x, as_version=4)) plus a newline. Our output
must also pass nbformat.validate.

The tool's location follows JUPYTER_AGENT_BIN (exported by tests/run):
$(dirname $JUPYTER_AGENT_BIN)/tests/unit/test_nb_canonical.
"""

import copy
import json
import os
import random
import re
import struct
import subprocess
import warnings

import nbformat
import pytest
from nbformat.v4 import (
    new_code_cell,
    new_markdown_cell,
    new_notebook,
    new_output,
    new_raw_cell,
)

ID_RE = re.compile(r"^[a-zA-Z0-9-_]+$")


def _tool():
    bin_path = os.environ.get("JUPYTER_AGENT_BIN")
    if not bin_path:
        here = os.path.dirname(os.path.abspath(__file__))
        bin_path = os.path.join(here, "..", "..", "build", "jupyter-agent")
        if not os.path.exists(os.path.join(os.path.dirname(bin_path), "tests")):
            pytest.skip("no build found; run through tests/run")
    tool = os.path.join(os.path.dirname(bin_path), "tests", "unit", "test_nb_canonical")
    assert os.access(tool, os.X_OK), f"{tool} is not built (make all)"
    return tool


def run_tool(*args):
    return subprocess.run(
        [_tool(), *args], capture_output=True, text=True, timeout=120
    )


def ours(tmp_path, text, name="in.ipynb"):
    """Our reader+writer on `text`; returns the bytes written."""
    src = tmp_path / name
    dst = tmp_path / ("out-" + name)
    src.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    r = run_tool("--roundtrip", str(src), str(dst))
    assert r.returncode == 0, r.stderr
    return dst.read_bytes()


def nbformat_file_bytes(nb):
    """What nbformat.write(nb, path) puts in the file."""
    s = nbformat.writes(nb)
    if not s.endswith("\n"):
        s += "\n"
    return s.encode("utf-8")


def reference(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbformat.reads(text, as_version=4)


def with_ids_of(nb, out_bytes):
    """nb with the cell ids our writer chose (for random-id cases)."""
    got = json.loads(out_bytes)
    assert len(got["cells"]) == len(nb.cells)
    for cell, mine in zip(nb.cells, got["cells"]):
        cell["id"] = mine["id"]
    return nb


def assert_valid(out_bytes):
    nb = nbformat.reads(out_bytes.decode("utf-8"), as_version=4)
    nbformat.validate(nb)
    ids = [c["id"] for c in nb.cells]
    assert all(ID_RE.match(i) and 1 <= len(i) <= 64 for i in ids), ids
    assert len(set(ids)) == len(ids), ids


def assert_same(expected, got):
    if expected != got:
        e, g = expected.decode().splitlines(), got.decode().splitlines()
        for n, (a, b) in enumerate(zip(e, g)):
            if a != b:
                pytest.fail(f"first difference at line {n + 1}:\n nbformat: {a!r}\n ours:     {b!r}")
        pytest.fail(f"lengths differ: nbformat {len(expected)} bytes, ours {len(got)}")


# --- a varied set of valid notebooks, all made with nbformat's API ----------


def png_b64():
    return (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwAD"
        "hgGAWjR9awAAAABJRU5ErkJggg==\n"
    )


def nb_basic():
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("# Title\n\nSome *text*."),
        new_code_cell("print('hi')\n1+1", execution_count=1, outputs=[
            new_output("stream", name="stdout", text="hi\n"),
            new_output("execute_result", data={"text/plain": "2"}, execution_count=1),
        ]),
        new_raw_cell("raw\ncontent\n"),
    ]
    nb.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python", "version": "3.11.2",
                          "codemirror_mode": {"name": "ipython", "version": 3}},
    }
    return nb


def nb_unicode():
    nb = new_notebook()
    texts = [
        "emoji 😀🎉👩‍👩‍👧 and flags 🇫🇷",
        "CJK 漢字かなカナ 한국어\n第二行",
        "RTL עברית العربية\n",
        "combining e\u0301 and zero\u200bwidth",
        "astral 𝕏𝔸 \U0010fffd",
    ]
    nb.cells = [new_markdown_cell(t) for t in texts]
    nb.cells.append(new_code_cell("s = '😀'\nprint(s * 3)", execution_count=7, outputs=[
        new_output("stream", name="stdout", text="😀😀😀\n漢字\n"),
    ]))
    nb.metadata = {"ключ": "значение", "z": 1, "Z": 2, "é": 3, "😀": 4, "a b": 5, "": 6, "~": 7}
    return nb


def nb_control_chars():
    nb = new_notebook()
    nb.cells = [
        new_code_cell("a = '\x01\x02\x1f'\nb = '\x7f'\tc = '\\\\n'\n\"quoted\"/slash"),
        new_markdown_cell("vertical\x0btab, form\x0cfeed, seps\x1c\x1d\x1e end"),
        new_markdown_cell("next\x85line, line\u2028sep, para\u2029sep, U+2027\u2027"),
        new_markdown_cell("nul \x00 inside"),
        new_code_cell("1/0", execution_count=2, outputs=[
            new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                       traceback=["\x1b[0;31m----\x1b[0m", "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"]),
        ]),
    ]
    nb.metadata = {"esc": "\x1b[1m\b\f\n\r\t\"\\/"}
    return nb


def random_floats(n, seed):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        bits = rng.getrandbits(64)
        f = struct.unpack("<d", struct.pack("<Q", bits))[0]
        if f == f and f not in (float("inf"), float("-inf")):
            out.append(f)
    return out


def nb_numbers():
    nb = new_notebook()
    rng = random.Random(7)
    nb.metadata = {
        "floats_bits": random_floats(2000, 1),
        "floats_human": [0.1, 0.2, 0.1 + 0.2, 1.0, -0.0, 1e16, 1e15, 1e-5, 1e-4,
                         123456.789, 2.5e-308, 5e-324, 1.7976931348623157e308,
                         9007199254740993.0, 1 / 3, 100.0, 3.14159, 6.02214076e23],
        "floats_decimal": [round(rng.uniform(-1e6, 1e6), rng.randint(0, 10)) for _ in range(500)],
        "ints": [0, -1, 1, 2**31, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63)],
        "bools": [True, False, None],
        "nested": {"a": {"b": {"c": [1, [2, [3, {"d": []}]], {}]}}, "e": [], "f": {}},
    }
    deep = cur = {}
    for i in range(60):
        cur["level"] = i
        cur["next"] = {}
        cur = cur["next"]
    nb.metadata["deep"] = deep
    nb.cells = [new_code_cell("x = 1", metadata={"tags": ["a", "b"], "custom": {"ratio": 0.75, "n": 3}})]
    return nb


def nb_attachments():
    nb = new_notebook()
    md = new_markdown_cell("![img](attachment:image.png)\n![t](attachment:note.txt)")
    md.attachments = {
        "image.png": {"image/png": png_b64()},
        "note.txt": {"text/plain": "line one\nline two\n"},
        "data.json": {"application/json": {"k": [1, 2, {"x": "y\nz"}]}},
    }
    raw = new_raw_cell("raw with attachment")
    raw.attachments = {"a.svg": {"image/svg+xml": "<svg>\n<g/>\n</svg>\n"}}
    nb.cells = [md, raw]
    return nb


def nb_rich_outputs():
    nb = new_notebook()
    nb.cells = [
        new_code_cell("df", execution_count=3, outputs=[
            new_output("execute_result", execution_count=3, data={
                "text/plain": "   a  b\n0  1  2\n1  3  4",
                "text/html": "<table>\n<tr><td>1</td></tr>\n</table>\n",
                "text/markdown": "| a |\n|---|\n| 1 |",
                "text/latex": "$x^2$",
            }, metadata={"isolated": True}),
        ]),
        new_code_cell("plot()", execution_count=4, outputs=[
            new_output("display_data", data={
                "image/png": png_b64(),
                "image/jpeg": "/9j/4AAQSkZJRg==\n",
                "image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'>\n<circle/>\n</svg>",
                "text/plain": "<Figure size 640x480 with 1 Axes>",
            }, metadata={"image/png": {"width": 640, "height": 480.5}}),
            new_output("display_data", data={
                "application/json": {"a": [1, 2.5, None, True], "s": "x\ny", "nested": {"z": {}}},
                "application/vnd.custom+json": {"list": ["l1\n", "l2"]},
                "application/javascript": "console.log(1);\nconsole.log(2);\n",
                "application/vnd.other": "not\nsplit\n",
                "text/plain": "",
            }),
        ]),
        new_code_cell("import sys\nprint('o'); print('e', file=sys.stderr)", execution_count=5, outputs=[
            new_output("stream", name="stdout", text="o\n"),
            new_output("stream", name="stderr", text="e\nno newline at end"),
            new_output("stream", name="stdout", text=""),
        ]),
    ]
    return nb


def nb_edge_sources():
    nb = new_notebook()
    sources = ["", "\n", "\n\n", "x", "x\n", "x\n\n", "a\r\nb\r\n", "a\rb\r", "\r\n",
               "trailing spaces   \n   ", "\t\tindent\n", " "]
    nb.cells = [new_code_cell(s) for s in sources]
    nb.cells += [new_markdown_cell(s) for s in sources]
    nb.cells += [new_raw_cell(s) for s in sources]
    nb.cells.append(new_code_cell("", execution_count=None, outputs=[]))
    return nb


def nb_unknown_metadata():
    nb = new_notebook()
    nb.metadata = {
        "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}},
        "toc": {"number_sections": True, "sideBar": False},
        "jupytext": {"formats": "ipynb,py:percent"},
        "vscode": {"interpreter": {"hash": "abc"}},
        "authors": [{"name": "Ada"}],
        "title": "Quarterly variance",
    }
    nb.cells = [new_code_cell("x", metadata={
        "collapsed": False, "scrolled": "auto", "jupyter": {"source_hidden": True},
        "execution": {"iopub.execute_input": "2024-01-31T12:00:00.000001Z"},
        "editable": False, "deletable": True, "name": "first", "my_ext": {"k": [1.5, "v"]},
    })]
    return nb


VALID = {
    "basic": nb_basic,
    "unicode": nb_unicode,
    "control_chars": nb_control_chars,
    "numbers": nb_numbers,
    "attachments": nb_attachments,
    "rich_outputs": nb_rich_outputs,
    "edge_sources": nb_edge_sources,
    "unknown_metadata": nb_unknown_metadata,
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_writer_is_byte_identical_to_nbformat(tmp_path, name):
    nb = VALID[name]()
    nbformat.validate(nb)
    text = nbformat.writes(nb)
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)
    assert_valid(got)


@pytest.mark.parametrize("name", sorted(VALID))
def test_unusual_layout_is_canonicalised_like_nbformat(tmp_path, name):
    """Compact JSON, shuffled keys, and strings given as lists of lines in
    other places than nbformat would put them."""
    d = json.loads(nbformat.writes(VALID[name]()))
    rng = random.Random(name)

    def shuffle(o):
        if isinstance(o, dict):
            items = list(o.items())
            rng.shuffle(items)
            return {k: shuffle(v) for k, v in items}
        if isinstance(o, list):
            return [shuffle(v) for v in o]
        return o

    for cell in d["cells"]:
        if isinstance(cell["source"], list):
            # pieces not at line boundaries: joined on read, split on write
            joined = "".join(cell["source"])
            cell["source"] = [joined[i:i + 3] for i in range(0, len(joined), 3)]
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                out["text"] = "".join(out["text"]) if isinstance(out["text"], list) else out["text"]
            for k, v in out.get("data", {}).items():
                if k == "image/png" and isinstance(v, str):
                    out["data"][k] = [v[:10], v[10:]]  # joined on read, kept a string
    text = json.dumps(shuffle(d), ensure_ascii=True, separators=(",", ":"))
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)
    assert_valid(got)


def test_transient_fields_are_dropped_like_nbformat(tmp_path):
    nb = nb_basic()
    d = json.loads(nbformat.writes(nb))
    d["metadata"]["signature"] = "sha256:abc"
    d["metadata"]["orig_nbformat"] = 3
    d["metadata"]["orig_nbformat_minor"] = 0
    d["cells"][1]["metadata"]["trusted"] = True
    text = json.dumps(d)
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)
    out = json.loads(got)
    assert "signature" not in out["metadata"]
    assert "trusted" not in out["cells"][1]["metadata"]


def test_unknown_fields_survive_like_nbformat(tmp_path):
    """Fields the schema does not know are kept (nbformat keeps them too,
    and merely logs that the notebook is invalid)."""
    d = json.loads(nbformat.writes(nb_rich_outputs()))
    d["x_top"] = {"kept": [1, 2]}
    d["cells"][0]["x_cell"] = "kept"
    d["cells"][0]["outputs"][0]["x_output"] = 1.25
    text = json.dumps(d)
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)
    out = json.loads(got)
    assert out["x_top"] == {"kept": [1, 2]}
    assert out["cells"][0]["x_cell"] == "kept"
    assert out["cells"][0]["outputs"][0]["x_output"] == 1.25


@pytest.mark.parametrize("minor", [0, 1, 2, 3, 4])
def test_old_minor_is_upgraded_with_valid_ids(tmp_path, minor):
    nb = nb_rich_outputs()
    d = json.loads(nbformat.writes(nb))
    d["nbformat_minor"] = minor
    for cell in d["cells"]:
        del cell["id"]
    text = json.dumps(d, indent=2)
    got = ours(tmp_path, text, f"v4{minor}.ipynb")
    out = json.loads(got)
    assert out["nbformat_minor"] == 5
    assert_valid(got)
    # Same bytes as nbformat's own upgrade, given the ids we chose.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = nbformat.v4.upgrade(reference(text))
    assert_same(nbformat_file_bytes(with_ids_of(ref, got)), got)


def test_duplicate_and_missing_ids_are_repaired_like_nbformat(tmp_path):
    d = json.loads(nbformat.writes(nb_edge_sources()))
    d["cells"][1]["id"] = d["cells"][0]["id"]
    d["cells"][2]["id"] = d["cells"][0]["id"]
    del d["cells"][3]["id"]
    text = json.dumps(d)
    got = ours(tmp_path, text)
    out = json.loads(got)
    assert out["cells"][0]["id"] == d["cells"][0]["id"], "the first holder keeps its id"
    for i in (4, 5, 6):
        assert out["cells"][i]["id"] == d["cells"][i]["id"], "unique ids are kept"
    assert_valid(got)
    assert_same(nbformat_file_bytes(with_ids_of(reference(text), got)), got)


def test_writer_output_is_a_fixed_point(tmp_path):
    """Reading our own output and writing it again changes nothing."""
    text = nbformat.writes(nb_rich_outputs())
    once = ours(tmp_path, text, "a.ipynb")
    twice = ours(tmp_path, once, "b.ipynb")
    assert once == twice


def test_c_validator_agrees_with_nbformat_on_valid_notebooks(tmp_path):
    for name, make in sorted(VALID.items()):
        p = tmp_path / f"{name}.ipynb"
        p.write_text(nbformat.writes(make()), encoding="utf-8")
        r = run_tool("--validate", str(p))
        assert r.returncode == 0, f"{name}: {r.stderr}"


@pytest.mark.parametrize("mutate,why", [
    (lambda d: d["cells"][1].pop("execution_count"), "code cell without execution_count"),
    (lambda d: d["cells"][1]["outputs"][0].pop("name"), "stream output without name"),
    (lambda d: d["cells"][0].__setitem__("id", "bad id!"), "invalid id"),
    (lambda d: d["cells"][1]["outputs"].append({"output_type": "nope"}), "unknown output type"),
    (lambda d: d["cells"][2].__setitem__("cell_type", "heading"), "unknown cell type"),
])
def test_c_validator_rejects_what_nbformat_rejects(tmp_path, mutate, why):
    d = json.loads(nbformat.writes(nb_basic()))
    mutate(d)
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(copy.deepcopy(d))
    p = tmp_path / "bad.ipynb"
    p.write_text(json.dumps(d), encoding="utf-8")
    r = run_tool("--validate", str(p))
    assert r.returncode != 0, f"C validator accepted a notebook with {why}"


def test_large_notebook_round_trips(tmp_path):
    nb = new_notebook()
    for i in range(3000):
        nb.cells.append(new_code_cell(f"x{i} = {i}\nprint(x{i})", execution_count=i + 1, outputs=[
            new_output("stream", name="stdout", text=f"{i}\n"),
        ]))
        nb.cells.append(new_markdown_cell(f"step **{i}**"))
    text = nbformat.writes(nb)
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)


# --- the session recorder ----------------------------------------------------


def test_recorded_session_is_a_valid_notebook(tmp_path):
    out = tmp_path / "session.ipynb"
    r = run_tool("--record", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5)
    # canonical: nbformat would write exactly these bytes
    assert_same(nbformat_file_bytes(nb), text.encode("utf-8"))
    md = nb.metadata
    assert md.kernelspec == {"name": "python3", "display_name": "Python 3 (ipykernel)",
                             "language": "python"}
    assert md.language_info["name"] == "python"
    assert md.language_info["codemirror_mode"] == {"name": "ipython", "version": 3}
    assert md.jupyter_agent["model"] == "replay:demo"
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["markdown", "markdown", "code", "code", "code", "code"]
    first = nb.cells[2]
    assert first.execution_count == 1
    assert first.metadata.execution == {
        "iopub.execute_input": "2024-01-31T12:00:00.000001Z",
        "iopub.status.busy": "2024-01-31T12:00:00.000001Z",
        "iopub.status.idle": "2024-01-31T12:00:00.500000Z",
        "shell.execute_reply": "2024-01-31T12:00:00.500000Z",
    }
    assert [o.output_type for o in first.outputs] == ["stream", "execute_result"]
    # the display updated in place after recording is what was saved
    assert nb.cells[3].outputs[0].data["text/plain"] == "<Figure size 640x480 with 2 Axes>"
    assert nb.cells[4].outputs[0].ename == "ZeroDivisionError"
    assert nb.cells[5].execution_count is None and nb.cells[5].outputs == []
    assert "execution" not in nb.cells[5].metadata


# --- what nbformat reads although strict JSON or its schema refuse it -------


def nb_with_json_extras():
    """Integers past 64 bits (one inside application/json output, as a real
    notebook had), NaN and infinities (what nbformat writes for a float NaN,
    e.g. papermill parameters)."""
    nb = new_notebook()
    nb.metadata["papermill"] = {"parameters": {
        "alpha": float("nan"), "hi": float("inf"), "lo": float("-inf"),
        "seed": 2 ** 70, "neg": -(2 ** 64), "edge": 2 ** 63 - 1}}
    nb.cells.append(new_code_cell("x", execution_count=1, outputs=[
        new_output("display_data", data={
            "application/json": {"id": 123456789012345678901234567890,
                                 "score": float("nan")},
            "text/plain": "{...}"}),
    ]))
    return nb


def test_big_integers_nan_and_infinity_round_trip_byte_exact(tmp_path):
    text = nbformat.writes(nb_with_json_extras())
    assert "123456789012345678901234567890" in text and "NaN" in text
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)


def test_nan_in_a_line_list_is_a_number_not_text_like_nbformat(tmp_path):
    """NaN / -Infinity inside a list of lines are numbers to Python: nbformat
    keeps such a mime-bundle list as it is and refuses such a source list
    (its "".join raises); we do the same and never write them as text."""
    nb = new_notebook()
    nb.cells.append(new_code_cell("x", execution_count=1, outputs=[
        new_output("display_data", data={"text/plain": "@LIST@"})]))
    d = json.loads(nbformat.writes(nb))
    d["cells"][0]["outputs"][0]["data"]["text/plain"] = "@LIST@"
    text = json.dumps(d, indent=1).replace('"@LIST@"', '["x\\n", NaN]')
    kept = reference(text).cells[0].outputs[0].data["text/plain"]
    assert kept[0] == "x\n" and kept[1] != kept[1]  # nbformat keeps the list
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)

    d = json.loads(nbformat.writes(nb_basic()))
    d["cells"][0]["source"] = ["a\n", "@NEGINF@"]
    bad = json.dumps(d).replace('"@NEGINF@"', "-Infinity")
    with pytest.raises(TypeError):
        reference(bad)
    src = tmp_path / "bad.ipynb"
    src.write_text(bad, encoding="utf-8")
    r = run_tool("--roundtrip", str(src), str(tmp_path / "out.ipynb"))
    assert r.returncode != 0 and "must be a string or a list of strings" in r.stderr


def test_a_float_past_the_double_range_reads_as_infinity_like_python(tmp_path):
    d = json.loads(nbformat.writes(nb_basic()))
    text = json.dumps(d).replace('"metadata": {}', '"metadata": {"x": 1e400}', 1)
    got = ours(tmp_path, text)
    assert_same(nbformat_file_bytes(reference(text)), got)
    assert b'"x": Infinity' in got


def test_lone_surrogate_escapes_are_read_and_written_back_escaped(tmp_path):
    """nbformat reads them (and cannot write them to a file: UTF-8 has no
    surrogates); we write the same escape back, which nbformat reads as
    the same notebook."""
    nb = new_notebook()
    nb.cells.append(new_markdown_cell("x"))
    nb.cells.append(new_code_cell("print(1)", execution_count=1, outputs=[
        new_output("stream", name="stdout", text="y")]))
    d = json.loads(nbformat.writes(nb))
    d["cells"][0]["source"] = "a\ud800b\udfff"
    d["cells"][1]["outputs"][0]["text"] = "\udc00 tail"
    text = json.dumps(d)  # ensure_ascii: the surrogates as escapes
    ref = reference(text)
    assert ref.cells[0].source == "a\ud800b\udfff"  # the premise
    got = ours(tmp_path, text)
    assert b"a\\ud800b\\udfff" in got and b"\\udc00 tail" in got
    assert reference(got.decode("utf-8")) == ref
    # Apart from the escapes, byte for byte what nbformat.writes makes.
    expect = nbformat.writes(ref) + "\n"
    expect = expect.encode("utf-8", "backslashreplace")
    assert got == expect


def nb_v3():
    """A notebook as nbformat 3 wrote it, made with nbformat.v3's API."""
    from nbformat import v3
    ws = v3.new_worksheet(cells=[
        v3.new_heading_cell("Title\nsecond line", level=2),
        v3.new_text_cell("markdown", source="Some *text*\nhere\n"),
        v3.new_code_cell(input="print('hi')\n1 + 1", prompt_number=3,
                         collapsed=True, outputs=[
            v3.new_output("stream", output_text="hi\n"),
            v3.new_output("pyout", output_text="2", prompt_number=3),
            v3.new_output("display_data", output_png=png_b64(),
                          output_text="<Figure>"),
            v3.new_output("display_data", output_json='{"a": [1, 2]}'),
            v3.new_output("pyerr", ename="ValueError", evalue="bad",
                          traceback=["Traceback", "ValueError: bad"]),
        ]),
        v3.new_text_cell("raw", source="raw text"),
    ])
    nb = v3.new_notebook(name="old one", worksheets=[ws],
                         metadata=v3.new_metadata(name="old one"))
    return v3.writes_json(nb)


def test_nbformat_3_is_upgraded_like_nbformat_v4_convert(tmp_path):
    text = nb_v3()
    assert json.loads(text)["nbformat"] == 3
    r_in = tmp_path / "v3.ipynb"
    r_in.write_text(text, encoding="utf-8")
    r = run_tool("--roundtrip", str(r_in), str(tmp_path / "v4.ipynb"))
    assert r.returncode == 0, r.stderr
    assert "nbformat 3, upgraded" in r.stderr
    got = (tmp_path / "v4.ipynb").read_bytes()
    ref = reference(text)
    assert ref.nbformat == 4 and len(ref.cells) == 4  # the premise
    assert_valid(got)
    assert_same(nbformat_file_bytes(with_ids_of(ref, got)), got)


@pytest.mark.parametrize("cell", [
    {"cell_type": "markdown", "id": "m1", "metadata": {}},
    {"cell_type": "raw", "id": "r1", "metadata": {}, "source": 5},
], ids=["markdown-without-source", "raw-source-not-a-string"])
def test_schema_breaks_nbformat_only_logs_are_read_with_a_warning(tmp_path,
                                                                  cell):
    d = json.loads(nbformat.writes(nb_basic()))
    d["cells"].insert(1, cell)
    text = json.dumps(d)
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(copy.deepcopy(d))  # invalid, yet nbformat reads it
    src = tmp_path / "in.ipynb"
    src.write_text(text, encoding="utf-8")
    r = run_tool("--roundtrip", str(src), str(tmp_path / "out.ipynb"))
    assert r.returncode == 0, r.stderr
    assert "cell 2 (%s)" % cell["cell_type"] in r.stderr
    got = (tmp_path / "out.ipynb").read_bytes()
    assert_same(nbformat_file_bytes(reference(text)), got)
