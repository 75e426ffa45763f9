"""Checks `jupyter-agent exec --json` outputs of charts_figs.py: each
figure's chart data (application/vnd.jupyter-agent.chart+json) against the
data the cell plotted, which the cell printed as "EXPECT {json}" just
before showing the figure. Prints one line per check: "0 what" (holds) or
"1 what: why"; charts.sh turns them into TAP."""
import json
import sys

import nbformat

CHART = "application/vnd.jupyter-agent.chart+json"


def close(a, b, tol=1e-9):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def same(a, b, tol=1e-9):
    return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))


def box_stats(data):
    import numpy as np
    d = np.asarray(data)
    q1, med, q3 = np.percentile(d, [25, 50, 75])
    iqr = q3 - q1
    lo = d[d >= q1 - 1.5 * iqr].min()
    hi = d[d <= q3 + 1.5 * iqr].max()
    out = sorted(d[(d < lo) | (d > hi)].tolist())
    return [lo, q1, med, q3, hi], out


def check(name, e, charts):
    c = charts[0] if charts else None
    els = c["elements"] if c else []
    if name == "line":
        assert c["type"] == "line" and c["title"] == "Growth"
        assert c["x"]["label"] == "time (s)" and c["x"]["unit"] == "s"
        assert c["y"]["unit"] == "m"
        assert [x["label"] for x in els] == ["squares", "doubles"]
        assert same(els[0]["x"], e["x"]) and same(els[0]["y"], e["y1"])
        assert same(els[1]["y"], e["y2"])
    elif name in ("bar", "barh", "sns_bar"):
        assert c["type"] == "bar", c["type"]
        assert c["orientation"] == ("horizontal" if name == "barh"
                                    else "vertical")
        assert [x["label"] for x in els] == e["cats"], els
        assert same([x["value"] for x in els], e["vals"])
        cat_axis = c["y"] if name == "barh" else c["x"]
        assert cat_axis["tick_labels"] == e["cats"]
        if name == "bar":
            assert c["title"] == "Revenue by region"
            assert c["y"]["unit"] == "k" and c["x"]["scale"] == "categorical"
    elif name in ("grouped", "stacked"):
        assert c["type"] == "bar" and c["layout"] == name, c.get("layout")
        a = [x for x in els if x["group"] == els[0]["group"]]
        b = [x for x in els if x["group"] != els[0]["group"]]
        assert [x["label"] for x in a] == e["cats"], a
        assert [x["label"] for x in b] == e["cats"], b
        assert same([x["value"] for x in a], e["a"])
        assert same([x["value"] for x in b], e["b"])
        if name == "stacked":
            assert same([x["base"] for x in b], e["a"])
        else:
            assert [a[0]["group"], b[0]["group"]] == ["2023", "2024"]
    elif name in ("scatter", "sns_scatter"):
        assert c["type"] == "scatter"
        assert same(els[0]["x"], e["x"]) and same(els[0]["y"], e["y"])
        if name == "scatter":
            assert els[0]["label"] == "pts"
    elif name == "pie":
        assert c["type"] == "pie"
        assert [x["label"] for x in els] == e["labels"]
        assert same([x["fraction"] for x in els], e["fractions"], 1e-6)
    elif name in ("box", "sns_box"):
        assert c["type"] == "box" and c["orientation"] == "vertical"
        assert [x["label"] for x in els] == e["labels"]
        for el, data in zip(els, e["data"]):
            want, outliers = box_stats(data)
            got = [el[k] for k in ("min", "first_quartile", "median",
                                   "third_quartile", "max")]
            assert same(got, want), (got, want)
            if name == "box":
                assert same(sorted(el["outliers"]), outliers)
    elif name == "hist":
        assert c["type"] == "histogram"
        assert same(els[0]["counts"], e["counts"])
        assert same(els[0]["edges"], e["edges"])
    elif name == "twin":
        assert len(charts) == 2 and all(x["type"] == "line" for x in charts)
        assert same(charts[0]["elements"][0]["y"], e["y1"])
        assert same(charts[1]["elements"][0]["y"], e["y2"])
        assert charts[1]["y"]["label"] == "neg"
    elif name == "subplots":
        assert [x["type"] for x in charts] == ["line", "bar"]
        assert same([x["value"] for x in charts[1]["elements"]], e["vals"])
    elif name == "log":
        assert c["y"]["scale"] == "log" and same(els[0]["y"], e["y"])
        assert c["y"]["tick_labels"][0].startswith("10^")
    elif name in ("date", "pandas_dates"):
        assert c["x"]["scale"] == "date", c["x"]
        assert els[0]["x"] == e["x"], els[0]["x"]
        assert same(els[0]["y"], e["y"])
    elif name == "empty":
        assert charts == []
    elif name == "line10k":
        # 2000 points a figure (docs/outputs.md): sampled at even steps,
        # each kept point the plotted one at its index
        import numpy as np
        el = els[0]
        assert el["sampled"] == {"of": 10000, "kept": 2000,
                                 "method": "stride"}, el.get("sampled")
        idx = np.linspace(0, 9999, 2000).round().astype(int)
        assert el["x"] == idx.tolist()
        assert same(el["y"], [e["y"][i] for i in idx])
    elif name == "scatter100k":
        el = els[0]
        assert el["sampled"]["of"] == e["n"] and len(el["x"]) <= 2000
        assert len(el["x"]) == el["sampled"]["kept"] == len(el["y"])
        assert same([el["x"][0], el["y"][0]], e["first"])
        assert same([el["x"][-1], el["y"][-1]], e["last"])
    else:
        raise AssertionError("no check for " + name)


def main(path, want):
    result = json.load(open(path))
    outputs = result["outputs"]
    pending, seen = [], []
    for o in outputs:
        if o["output_type"] == "stream":
            for line in o["text"].splitlines():
                if line.startswith("EXPECT "):
                    pending.append(json.loads(line[7:]))
        elif CHART in o.get("data", {}) and pending:
            e = pending.pop(0)
            seen.append(e["name"])
            try:
                check(e["name"], e, o["data"][CHART]["charts"])
                print("0 %s: the chart data equals the data plotted"
                      % e["name"])
            except Exception as x:
                print("1 %s: %r; chart: %.600s" % (
                    e["name"], x, json.dumps(o["data"][CHART])))
    missing = [n for n in want.split(",") if n not in seen]
    print("%d every figure has chart data%s" % (
        bool(missing), ": missing " + ",".join(missing) if missing else ""))
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("figures")
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nb.cells = [cell]
    try:
        nbformat.validate(nb)
        print("0 a notebook with these chart outputs is nbformat-valid")
    except Exception as x:
        print("1 a notebook with these chart outputs is nbformat-valid: %s"
              % str(x)[:300])


main(sys.argv[1], sys.argv[2])
