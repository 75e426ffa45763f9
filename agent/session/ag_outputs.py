# ag_outputs.py: run once, silently, in each agent session's Python kernel
# (ag_session.c). It adds two display formatters next to IPython's own:
#   application/vnd.jupyter-agent.chart+json  for each matplotlib Figure
#   application/vnd.jupyter-agent.table+json  for each pandas DataFrame/Series
# The schema is docs/outputs.md. Everything here only reads the figure or
# the frame: it never draws, never imports matplotlib or pandas itself (it
# waits for the user to), and never raises into the user's cell — a figure
# it cannot read becomes one chart of type "unknown" with the reason.
# All of it lives inside one function, so the user's namespace gains nothing.


def _ja_outputs():
    CHART = 'application/vnd.jupyter-agent.chart+json'
    TABLE = 'application/vnd.jupyter-agent.table+json'
    # Points per figure, split among its axes and series; more are sampled
    # at even steps. 2000 is finer than the figure's own pixels and keeps
    # the JSON encoding of a figure to a few % of its render
    # (bench/charts.py).
    MAX_POINTS = 2000
    MAX_CHARTS = 16       # axes per figure
    MAX_ITEMS = 1000      # bars, wedges, boxes, outliers per chart
    MAX_TICKS = 50
    MAX_STR = 200
    HEAD_ROWS, TAIL_ROWS, MAX_COLS = 10, 5, 50

    try:
        from IPython import get_ipython
        from IPython.core.formatters import BaseFormatter
        from traitlets import ObjectName, Unicode
    except Exception:
        return
    ip = get_ipython()
    if ip is None or CHART in ip.display_formatter.formatters:
        return

    def s(v):
        if v is None:
            return None
        v = str(v)
        if '$' in v or '\u2212' in v:  # mathtext ticks, Unicode minus
            v = v.replace('\u2212', '-').replace('$', '')
            v = v.replace('\\mathdefault', '').replace('{', '')
            v = v.replace('}', '')
        return v if len(v) <= MAX_STR else v[:MAX_STR - 1] + '\u2026'

    def num(v):
        try:
            f = float(v)
        except Exception:
            return None
        if f != f or f in (float('inf'), float('-inf')):
            return None
        if f == int(f) and abs(f) < 2 ** 53 and not isinstance(v, float):
            return int(f)
        return f

    def series_name(artist):
        label = artist.get_label()
        if not label or str(label).startswith('_'):
            return None
        return s(label)

    def values(arr, idx, conv):
        import numpy as np
        a = np.asarray(arr, dtype=float) if conv is None else np.asarray(arr)
        if idx is not None:
            a = a[idx]
        if conv is not None:
            return conv(a)
        if np.isfinite(a).all():
            # whole numbers as ints: JSON encodes them several times faster
            # than floats (an index, counts, years)
            if len(a) > 16 and (a == np.rint(a)).all() and \
                    np.abs(a).max() < 2 ** 53:
                return a.astype(np.int64).tolist()
            return a.tolist()
        return [x if x == x and abs(x) != float('inf') else None
                for x in a.tolist()]

    def pick(n, budget):
        # Indices of at most `budget` of n values at even steps, first and
        # last kept; None when all fit.
        if n <= budget:
            return None
        import numpy as np
        return np.linspace(0, n - 1, max(budget, 2)).round().astype(int)

    # ---- axes -----------------------------------------------------------

    def unit_of(label):
        import re
        m = re.match(r'^(.*?)\s*[\(\[]([^\(\)\[\]]+)[\)\]]\s*$', label or '')
        return (m.group(1) or None, m.group(2)) if m else (label or None, None)

    def date_conv(axis):
        fmt = axis.get_major_formatter()
        freq = getattr(fmt, 'freq', None)
        if freq is not None and 'pandas' in type(fmt).__module__:
            import pandas as pd

            def conv(a):
                return [pd.Period(ordinal=int(round(float(x))), freq=freq)
                        .to_timestamp().isoformat() for x in a]
            return conv
        from matplotlib.dates import num2date

        def conv(a):
            return [d.replace(tzinfo=None).isoformat()
                    for d in num2date(a.astype(float))]
        return conv

    def axis_kind(axis):
        fmt = axis.get_major_formatter()
        conv = getattr(axis, 'converter', None)
        names = type(fmt).__module__ + type(fmt).__name__
        cnames = type(conv).__module__ + type(conv).__name__ if conv else ''
        if 'dates' in names or 'Date' in names or 'Date' in cnames \
                or 'Period' in cnames:
            return 'date'
        units = getattr(axis, 'units', None)
        if type(units).__name__ == 'UnitData' and hasattr(units, '_mapping'):
            return 'categorical'
        return axis.get_scale()

    def categories(axis):
        # position -> category name: matplotlib's string categories, else
        # the tick labels at integer positions (pandas bar plots, seaborn).
        units = getattr(axis, 'units', None)
        if type(units).__name__ == 'UnitData' and hasattr(units, '_mapping'):
            return {float(v): s(k) for k, v in units._mapping.items()}
        out = {}
        for loc, text in ticks(axis, any_range=True):
            if text:
                out[float(loc)] = text
        return out

    def ticks(axis, any_range=False):
        locs = list(axis.get_majorticklocs())
        try:
            labels = axis.get_major_formatter().format_ticks(locs)
        except Exception:
            labels = [''] * len(locs)
        lo, hi = sorted(axis.get_view_interval())
        lo -= abs(lo) * 1e-9 + (hi - lo) * 1e-12
        hi += abs(hi) * 1e-9 + (hi - lo) * 1e-12
        return [(loc, s(t)) for loc, t in zip(locs, labels)
                if any_range or lo <= loc <= hi][:MAX_TICKS]

    def axis_info(axis, kind):
        label = axis.get_label().get_text()
        name, unit = unit_of(label)
        lo, hi = axis.get_view_interval()
        out = {'label': s(label) or None, 'unit': s(unit), 'scale': kind}
        tl = ticks(axis)
        if kind == 'date':
            conv = date_conv(axis)
            out['limits'] = conv(__import__('numpy').array([lo, hi]))
            out['ticks'] = conv(__import__('numpy').array([t[0] for t in tl]))
        else:
            out['limits'] = [num(lo), num(hi)]
            out['ticks'] = [num(t[0]) for t in tl]
        out['tick_labels'] = [t[1] for t in tl]
        return out

    def label_at(cats, pos):
        # the category at pos, else the nearest one within half the gap
        # between two categories (grouped bars sit beside their tick)
        best, dist = None, None
        for p, name in cats.items():
            if dist is None or abs(p - pos) < dist:
                best, dist = name, abs(p - pos)
        ps = sorted(cats)
        gap = min([b - a for a, b in zip(ps, ps[1:])] or [1.0])
        if best is not None and dist < gap / 2:
            return best
        return s(num(pos))

    # ---- elements by kind -------------------------------------------------

    def line_xy(line):
        return line.get_xdata(orig=False), line.get_ydata(orig=False)

    def rect_of(xs, ys):
        # (x0, x1, y0, y1) when the 5 points trace an axis-aligned box.
        if len(xs) < 5:
            return None
        x, y = [float(v) for v in xs[:5]], [float(v) for v in ys[:5]]
        if x[0] == x[3] == x[4] and x[1] == x[2] and y[0] == y[1] == y[4] \
                and y[2] == y[3] and x[0] != x[1] and y[0] != y[2]:
            return min(x[0], x[1]), max(x[0], x[1]), min(y[0], y[2]), \
                max(y[0], y[2])
        return None

    def boxes(ax, used, xconv, yconv):
        from matplotlib.patches import PathPatch
        cands = []
        for a in ax.lines:
            xs, ys = line_xy(a)
            r = rect_of(xs, ys)
            if r:
                cands.append((a, r))
        for p in ax.patches:
            if isinstance(p, PathPatch):
                v = p.get_path().vertices
                r = rect_of(v[:, 0], v[:, 1]) if len(v) >= 5 else None
                if r:
                    cands.append((p, r))
        if not cands:
            return None, None
        segs = []
        for a in ax.lines:
            xs, ys = line_xy(a)
            if len(xs) == 2:
                segs.append((a, [float(v) for v in xs], [float(v) for v in ys]))
        out, orient = [], None
        for art, (x0, x1, y0, y1) in cands:
            for vertical in (True, False):
                # in the box's own frame: c the centre across, q1/q3 along
                c = (x0 + x1) / 2 if vertical else (y0 + y1) / 2
                q1, q3 = (y0, y1) if vertical else (x0, x1)
                a0, a1 = (x0, x1) if vertical else (y0, y1)
                lo = hi = med = None
                mine = []
                for line, xs, ys in segs:
                    across, along = (xs, ys) if vertical else (ys, xs)
                    if across[0] == across[1] == c and q1 in along:
                        other = along[1] if along[0] == q1 else along[0]
                        if other <= q1:
                            lo = other
                            mine.append(line)
                    if across[0] == across[1] == c and q3 in along:
                        other = along[1] if along[0] == q3 else along[0]
                        if other >= q3:
                            hi = other
                            mine.append(line)
                    if along[0] == along[1] and q1 <= along[0] <= q3 and \
                            min(across) >= a0 - 1e-9 and \
                            max(across) <= a1 + 1e-9:
                        if med is None and min(across) <= a0 + 1e-9:
                            med = along[0]
                        mine.append(line)
                if lo is None or hi is None:
                    continue
                orient = 'vertical' if vertical else 'horizontal'
                outliers = []
                for line in ax.lines:
                    if line.get_linestyle() in ('None', '', ' ') and \
                            line not in used:
                        xs, ys = line_xy(line)
                        across, along = (xs, ys) if vertical else (ys, xs)
                        if len(xs) and all(float(v) == c for v in across):
                            outliers += [num(v) for v in along]
                            mine.append(line)
                for line in ax.lines:  # the caps: short lines at the ends
                    xs, ys = line_xy(line)
                    if len(xs) == 2:
                        across, along = (xs, ys) if vertical else (ys, xs)
                        if along[0] == along[1] in (lo, hi) and \
                                min(across) <= c <= max(across):
                            mine.append(line)
                used.update(mine)
                used.add(art)
                cats = categories(ax.xaxis if vertical else ax.yaxis)
                out.append({'label': label_at(cats, c), 'min': num(lo),
                            'first_quartile': num(q1), 'median': num(med),
                            'third_quartile': num(q3), 'max': num(hi),
                            'outliers': outliers[:MAX_ITEMS]})
                break
        return (out[:MAX_ITEMS], orient) if out else (None, None)

    def bars(ax, chart):
        from matplotlib.container import BarContainer
        conts = [c for c in ax.containers if isinstance(c, BarContainer)]
        if not conts:
            return None
        orient = getattr(conts[0], 'orientation', None) or 'vertical'
        vertical = orient == 'vertical'
        axis = ax.xaxis if vertical else ax.yaxis
        rects = []
        stacked = False
        for c in conts:
            for p in c.patches:
                x, y, w, h = p.get_x(), p.get_y(), p.get_width(), p.get_height()
                pos, size = (x, w) if vertical else (y, h)
                base, val = (y, h) if vertical else (x, w)
                if base != 0:
                    stacked = True
                rects.append((c, pos, size, base, val))
        # a histogram: one numeric series of bars that touch
        if len(conts) == 1 and len(rects) > 1 and \
                axis_kind(axis) != 'categorical':
            rs = sorted(rects, key=lambda r: r[1])
            width = max(abs(r[2]) for r in rs) or 1
            if all(abs(a[1] + a[2] - b[1]) <= 1e-9 * width
                   for a, b in zip(rs, rs[1:])):
                budget = MAX_POINTS // chart['_share']
                keep = rs[:budget]
                chart['type'] = 'histogram'
                chart['orientation'] = orient
                el = {'label': series_name(conts[0]),
                      'edges': [num(r[1]) for r in keep] +
                      [num(keep[-1][1] + keep[-1][2])],
                      'counts': [num(r[4]) for r in keep]}
                if len(keep) < len(rs):
                    el['sampled'] = {'of': len(rs), 'kept': len(keep),
                                     'method': 'first'}
                return [el]
        cats = categories(axis)
        chart['type'] = 'bar'
        chart['orientation'] = orient
        chart['layout'] = 'stacked' if stacked else (
            'grouped' if len(conts) > 1 else 'single')
        out = []
        for c, pos, size, base, val in rects[:MAX_ITEMS]:
            centre = pos + size / 2
            el = {'label': label_at(cats, centre), 'group': series_name(c), 'value': num(val)}
            if stacked:
                el['base'] = num(base)
            out.append(el)
        if len(rects) > MAX_ITEMS:
            chart['items_cut'] = {'of': len(rects), 'kept': MAX_ITEMS}
        return out

    def wedges(ax):
        from matplotlib.patches import Wedge
        ws = [p for p in ax.patches if isinstance(p, Wedge)]
        if not ws:
            return None
        out = []
        for w in ws[:MAX_ITEMS]:
            span = (w.theta2 - w.theta1) % 360 or 360.0
            out.append({'label': series_name(w), 'fraction': span / 360.0,
                        'angle': num(span), 'radius': num(w.r)})
        return out

    def points(ax, budget, xconv, yconv):
        from matplotlib.collections import PathCollection
        cs = [c for c in ax.collections if isinstance(c, PathCollection)]
        if not cs:
            return None
        out = []
        each = max(1, budget // len(cs))
        for c in cs[:MAX_ITEMS]:
            off = c.get_offsets()
            n = len(off)
            idx = pick(n, each)
            import numpy as np
            off = np.ma.filled(np.ma.asarray(off, dtype=float), np.nan)
            el = {'label': series_name(c),
                  'x': values(off[:, 0] if n else [], idx, xconv),
                  'y': values(off[:, 1] if n else [], idx, yconv)}
            if idx is not None:
                el['sampled'] = {'of': n, 'kept': len(idx), 'method': 'stride'}
            out.append(el)
        return out

    def lines(ax, used, budget, xconv, yconv):
        ls = [ln for ln in ax.lines if ln not in used and ln.get_visible()]
        if not ls:
            return None
        out = []
        each = max(1, budget // len(ls))
        for ln in ls[:MAX_ITEMS]:
            xs, ys = line_xy(ln)
            n = len(xs)
            idx = pick(n, each)
            el = {'label': series_name(ln), 'x': values(xs, idx, xconv),
                  'y': values(ys, idx, yconv)}
            if idx is not None:
                el['sampled'] = {'of': n, 'kept': len(idx), 'method': 'stride'}
            out.append(el)
        return out

    def chart_of_axes(ax, share, fig_title):
        title = ax.get_title() or ax.get_title('left') or \
            ax.get_title('right') or fig_title
        xk, yk = axis_kind(ax.xaxis), axis_kind(ax.yaxis)
        chart = {'type': 'unknown', 'title': s(title) or None,
                 'x': axis_info(ax.xaxis, xk), 'y': axis_info(ax.yaxis, yk),
                 '_share': share}
        xconv = date_conv(ax.xaxis) if xk == 'date' else None
        yconv = date_conv(ax.yaxis) if yk == 'date' else None
        if xk == 'categorical':
            cats = categories(ax.xaxis)
            xconv = (lambda a, c=cats: [label_at(c, float(v)) for v in a])
        if yk == 'categorical':
            cats = categories(ax.yaxis)
            yconv = (lambda a, c=cats: [label_at(c, float(v)) for v in a])
        budget = MAX_POINTS // share
        used = set()
        kinds = []
        pie = wedges(ax)
        if pie is not None:
            chart['type'] = 'pie'
            chart['elements'] = pie
            return finish(chart)
        bx, orient = boxes(ax, used, xconv, yconv)
        if bx is not None:
            kinds.append(('box', bx))
            chart['orientation'] = orient
        b = bars(ax, chart) if bx is None else None
        if b is not None:
            kinds.append((chart['type'], b))
        p = points(ax, budget // 2 if ax.lines else budget, xconv, yconv)
        if p is not None:
            kinds.append(('scatter', p))
        ln = lines(ax, used, budget // 2 if p else budget, xconv, yconv)
        if ln is not None:
            kinds.append(('line', ln))
        if not kinds:
            other = sorted({type(a).__name__ for a in ax.get_children()
                            if type(a).__name__ in (
                                'AxesImage', 'QuadMesh', 'PolyCollection',
                                'LineCollection', 'Polygon', 'Rectangle',
                                'Text', 'Annotation')})
            chart['type'] = 'unknown'
            chart['reason'] = 'nothing plotted' if not ax.has_data() else \
                'no line, bar, scatter, pie or box artists'
            chart['elements'] = []
            if other and ax.has_data():
                chart['artists'] = other[:10]
            return finish(chart)
        chart['type'], chart['elements'] = kinds[0]
        if len(kinds) > 1:
            chart['overlays'] = [{'type': k, 'elements': e}
                                 for k, e in kinds[1:]]
        return finish(chart)

    def finish(chart):
        chart.pop('_share', None)
        return chart

    def chart_of_figure(fig):
        out = {'version': 1, 'charts': []}
        try:
            axes = [a for a in fig.get_axes()
                    if a.get_label() != '<colorbar>' and a.get_visible()]
            sup = getattr(fig, '_suptitle', None)
            fig_title = sup.get_text() if sup is not None else None
            if fig_title:
                out['title'] = s(fig_title)
            if len(axes) > MAX_CHARTS:
                out['charts_cut'] = {'of': len(axes), 'kept': MAX_CHARTS}
            axes = axes[:MAX_CHARTS]
            for ax in axes:
                try:
                    out['charts'].append(
                        chart_of_axes(ax, max(1, len(axes)),
                                      fig_title if len(axes) == 1 else None))
                except Exception as e:
                    out['charts'].append({
                        'type': 'unknown', 'title': None, 'elements': [],
                        'reason': s('the extractor could not read these '
                                    'axes: %s: %s' % (type(e).__name__, e))})
        except Exception as e:
            out = {'version': 1, 'charts': [{
                'type': 'unknown', 'title': None, 'elements': [],
                'reason': s('the extractor could not read this figure: '
                            '%s: %s' % (type(e).__name__, e))}]}
        return out

    # ---- tables -----------------------------------------------------------

    def cell(v):
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, (int, float)):
            return num(v) if isinstance(v, float) else (
                v if abs(v) < 2 ** 63 else str(v))
        t = type(v).__module__
        if t == 'numpy':
            if hasattr(v, 'dtype') and v.dtype.kind == 'b':
                return bool(v)
            if hasattr(v, 'dtype') and v.dtype.kind in 'iu':
                return int(v)
            if hasattr(v, 'dtype') and v.dtype.kind == 'f':
                return num(float(v))
        if hasattr(v, 'isoformat'):
            try:
                if v != v:  # NaT
                    return None
                return v.isoformat()
            except Exception:
                pass
        return s(v)

    def rows_of(df):
        return {'index': [cell(i) for i in df.index],
                'rows': [[cell(v) for v in r]
                         for r in df.itertuples(index=False, name=None)]}

    def table_of(obj):
        try:
            kind = 'series' if type(obj).__name__ == 'Series' else 'dataframe'
            df = obj.to_frame() if kind == 'series' else obj
            nrows, ncols = df.shape
            part = df.iloc[:, :MAX_COLS]
            out = {'version': 1, 'kind': kind, 'shape': [nrows, ncols],
                   'index': {'name': s(df.index.name),
                             'dtype': s(df.index.dtype)},
                   'columns': [{'name': s(c), 'dtype': s(t)} for c, t in
                               zip(part.columns, part.dtypes)],
                   'head': rows_of(part.iloc[:HEAD_ROWS])}
            if nrows > HEAD_ROWS:
                out['tail'] = rows_of(part.iloc[max(HEAD_ROWS,
                                                    nrows - TAIL_ROWS):])
            return out
        except Exception as e:
            return {'version': 1, 'kind': 'unknown',
                    'reason': s('%s: %s' % (type(e).__name__, e))}

    # ---- formatters ---------------------------------------------------------

    def guard(fn, fallback):
        def call(obj):
            try:
                return fn(obj)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # never into the user's cell
                return fallback(s('%s: %s' % (type(e).__name__, e)))
        return call

    def chart_failed(why):
        return {'version': 1, 'charts': [{'type': 'unknown', 'title': None,
                                          'elements': [], 'reason': why}]}

    def table_failed(why):
        return {'version': 1, 'kind': 'unknown', 'reason': why}

    # Matched by class name along the MRO, not through type_printers:
    # matplotlib_inline's select_figure_formats pops Figure from every
    # formatter each time the inline backend is set up.
    def formatter(mime, method, kinds, fn):
        class Formatter(BaseFormatter):
            format_type = Unicode(mime)
            _return_type = (dict,)
            print_method = ObjectName(method)

            def __call__(self, obj):
                if not self.enabled:
                    return None
                for c in type(obj).__mro__:
                    if (c.__module__, c.__name__) in kinds:
                        return fn(obj)
                return None
        return Formatter(parent=ip.display_formatter)

    ip.display_formatter.formatters[CHART] = formatter(
        CHART, '_repr_jupyter_agent_chart_',
        {('matplotlib.figure', 'Figure')},
        guard(chart_of_figure, chart_failed))
    ip.display_formatter.formatters[TABLE] = formatter(
        TABLE, '_repr_jupyter_agent_table_',
        {('pandas.core.frame', 'DataFrame'), ('pandas.core.series', 'Series')},
        guard(table_of, table_failed))

_ja_outputs()
del _ja_outputs
