#include "agent/loop/ag_chart.h"
#include "agent/session/ag_outputs.h"

#include "common/jget.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Values shown per series before "… N more". */
#define SERIES_VALUES 24

/* A JSON value as short text: numbers with 4 significant digits. */
static void
s_val(buf_t *b, const json_t *v)
{
    if (json_is_integer(v))
        buf_printf(b, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        buf_printf(b, "%.4g", json_real_value(v));
    else if (json_is_string(v))
        buf_puts(b, json_string_value(v));
    else if (json_is_true(v) || json_is_false(v))
        buf_puts(b, json_is_true(v) ? "true" : "false");
    else
        buf_puts(b, "null");
}

static void
s_axis(buf_t *b, const char *name, const json_t *axis)
{
    const char *label = jget_str(axis, "label", NULL);
    const char *scale = jget_str(axis, "scale", NULL);
    bool odd = scale && strcmp(scale, "linear") && strcmp(scale, "categorical");
    if (!label && !odd)
        return;
    buf_printf(b, ", %s: %s", name, label ? label : "");
    if (odd)
        buf_printf(b, "%s(%s scale)", label ? " " : "", scale);
}

/* min..max of the numbers in an array, or nothing. */
static void
s_range(buf_t *b, const char *name, const json_t *a)
{
    double lo = INFINITY, hi = -INFINITY;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (json_is_number(v))
    {
        double d = json_number_value(v);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    if (lo <= hi)
        buf_printf(b, ", %s %.4g..%.4g", name, lo, hi);
    else if (json_array_size(a) && json_is_string(json_array_get(a, 0)))
        buf_printf(
            b, ", %s %s..%s", name, json_string_value(json_array_get(a, 0)),
            json_string_value(json_array_get(a, json_array_size(a) - 1)));
}

static void
s_points(buf_t *b, const json_t *el)
{
    const json_t *x = json_object_get(el, "x"), *y = json_object_get(el, "y");
    const json_t *sampled = json_object_get(el, "sampled");
    size_t n = json_array_size(y);
    long long of = json_integer_value(json_object_get(sampled, "of"));
    const char *label = jget_str(el, "label", NULL);
    buf_printf(b, "%s%s%s%zu points", label ? "'" : "", label ? label : "",
               label ? "' " : "", of ? (size_t)of : n);
    if (of)
        buf_printf(b, " (%zu kept)", n);
    s_range(b, "x", x);
    s_range(b, "y", y);
    buf_puts(b, ":");
    size_t show = n < SERIES_VALUES ? n : SERIES_VALUES;
    for (size_t i = 0; i < show; i++) {
        buf_puts(b, " ");
        s_val(b, json_array_get(x, i));
        buf_puts(b, ",");
        s_val(b, json_array_get(y, i));
    }
    if (n > show)
        buf_printf(b, " … %zu more", n - show);
}

static void
s_bars(buf_t *b, const json_t *els)
{
    size_t i;
    json_t *el;
    json_array_foreach(els, i, el)
    {
        const char *group = jget_str(el, "group", NULL);
        buf_printf(b, "%s%s%s%s ", i ? ", " : "", group ? group : "",
                   group ? "/" : "", jget_str(el, "label", "?"));
        s_val(b, json_object_get(el, "value"));
    }
}

static void
s_elements(buf_t *b, const char *type, const json_t *els)
{
    size_t i, j;
    json_t *el, *v;
    if (!strcmp(type, "bar")) {
        s_bars(b, els);
        return;
    }
    json_array_foreach(els, i, el)
    {
        if (i)
            buf_puts(b, "; ");
        if (!strcmp(type, "line") || !strcmp(type, "scatter")) {
            s_points(b, el);
        } else if (!strcmp(type, "pie")) {
            const char *l = jget_str(el, "label", NULL);
            buf_printf(b, "%s %.1f%%", l ? l : "?",
                       100 *
                           json_number_value(json_object_get(el, "fraction")));
        } else if (!strcmp(type, "box")) {
            static const char *const k[] = {"min", "first_quartile", "median",
                                            "third_quartile", "max"};
            static const char *const n[] = {"min", "q1", "median", "q3", "max"};
            const char *l = jget_str(el, "label", NULL);
            buf_printf(b, "%s:", l ? l : "?");
            for (size_t q = 0; q < 5; q++) {
                buf_printf(b, " %s ", n[q]);
                s_val(b, json_object_get(el, k[q]));
            }
            buf_printf(b, ", %zu outliers",
                       json_array_size(json_object_get(el, "outliers")));
        } else if (!strcmp(type, "histogram")) {
            const json_t *edges = json_object_get(el, "edges");
            const json_t *counts = json_object_get(el, "counts");
            buf_printf(b, "%zu bins:", json_array_size(counts));
            json_array_foreach(counts, j, v)
            {
                buf_puts(b, " [");
                s_val(b, json_array_get(edges, j));
                buf_puts(b, ",");
                s_val(b, json_array_get(edges, j + 1));
                buf_puts(b, ") ");
                s_val(b, v);
            }
        }
    }
}

static void
s_one(buf_t *b, const json_t *c)
{
    const char *type =
        jget_str(c, "type", NULL) ? jget_str(c, "type", NULL) : "unknown";
    const char *title = jget_str(c, "title", NULL);
    const char *orient = jget_str(c, "orientation", NULL);
    const char *layout = jget_str(c, "layout", NULL);
    if (!strcmp(type, "bar") && orient && !strcmp(orient, "horizontal"))
        buf_puts(b, "horizontal ");
    if (layout && strcmp(layout, "single"))
        buf_printf(b, "%s ", layout);
    buf_printf(b, "%s chart", type);
    if (title)
        buf_printf(b, " '%s'", title);
    s_axis(b, "x", json_object_get(c, "x"));
    s_axis(b, "y", json_object_get(c, "y"));
    if (!strcmp(type, "unknown")) {
        const char *why = jget_str(c, "reason", NULL);
        buf_printf(b, " (%s)", why ? why : "not read");
        return;
    }
    buf_puts(b, "; ");
    s_elements(b, type, json_object_get(c, "elements"));
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(c, "overlays"), i, o)
    {
        buf_printf(b, "; with %s: ",
                   jget_str(o, "type", NULL) ? jget_str(o, "type", NULL) : "?");
        s_elements(b,
                   jget_str(o, "type", NULL) ? jget_str(o, "type", NULL) : "",
                   json_object_get(o, "elements"));
    }
}

/* Move `t` (text written without a cap) into `b`, cut to `budget` bytes
 * at a character boundary with " …" when longer. */
static void
s_emit(buf_t *b, buf_t *t, size_t budget)
{
    const char *s = buf_cstr(t);
    size_t len = t->len;
    if (len > budget) {
        size_t cut = utf8_char_start(s, budget > 4 ? budget - 4 : 0);
        buf_append(b, s, cut);
        buf_puts(b, " …");
    } else {
        buf_append(b, s, len);
    }
}

void
ag_chart_text(buf_t *b, const json_t *chart, size_t budget)
{
    const json_t *charts = json_object_get(chart, "charts");
    buf_t t;
    buf_init(&t, 0);
    if (!json_is_array(charts)) {
        buf_puts(&t, "[chart data in an unknown form]");
    } else if (json_array_size(charts) == 0) {
        buf_puts(&t, "[chart data: a figure with nothing plotted]");
    } else {
        size_t i;
        json_t *c;
        size_t n = json_array_size(charts);
        /* Each chart its share, so the second of two is not crowded out. */
        size_t each = budget / n;
        json_array_foreach(charts, i, c)
        {
            buf_t one;
            buf_init(&one, 0);
            buf_printf(&one, "%s[", i ? "\n" : "");
            s_one(&one, c);
            buf_puts(&one, "]");
            s_emit(&t, &one, each);
            buf_release(&one);
        }
    }
    s_emit(b, &t, budget);
    buf_puts(b, "\n");
    buf_release(&t);
}

static void
s_row(buf_t *t, const json_t *index, const json_t *rows, size_t i)
{
    s_val(t, json_array_get(index, i));
    size_t j;
    json_t *v;
    json_array_foreach(json_array_get(rows, i), j, v)
    {
        buf_puts(t, " | ");
        s_val(t, v);
    }
    buf_puts(t, "\n");
}

void
ag_table_text(buf_t *b, const json_t *table, size_t budget)
{
    buf_t t;
    buf_init(&t, 0);
    const json_t *shape = json_object_get(table, "shape");
    const char *kind = jget_str(table, "kind", NULL);
    if (!json_is_array(shape) || !kind) {
        buf_puts(&t, "[table data in an unknown form]\n");
        goto out;
    }
    long long nrows = json_integer_value(json_array_get(shape, 0));
    long long ncols = json_integer_value(json_array_get(shape, 1));
    buf_printf(&t, "%s: %lld rows × %lld columns\n",
               !strcmp(kind, "series") ? "Series" : "DataFrame", nrows, ncols);
    const char *iname = jget_str(json_object_get(table, "index"), "name", NULL);
    buf_printf(&t, "%s", iname ? iname : "index");
    size_t j;
    json_t *c;
    const json_t *cols = json_object_get(table, "columns");
    json_array_foreach(cols, j, c)
    {
        const char *name = jget_str(c, "name", NULL),
                   *dt = jget_str(c, "dtype", NULL);
        buf_printf(&t, " | %s (%s)", name ? name : "", dt ? dt : "?");
    }
    if ((long long)json_array_size(cols) < ncols)
        buf_printf(&t, " | … %lld more columns",
                   ncols - (long long)json_array_size(cols));
    buf_puts(&t, "\n");
    const json_t *head = json_object_get(table, "head");
    const json_t *tail = json_object_get(table, "tail");
    const json_t *hi = json_object_get(head, "index");
    const json_t *hr = json_object_get(head, "rows");
    for (size_t i = 0; i < json_array_size(hr); i++)
        s_row(&t, hi, hr, i);
    const json_t *ti = json_object_get(tail, "index");
    const json_t *tr = json_object_get(tail, "rows");
    long long shown = (long long)(json_array_size(hr) + json_array_size(tr));
    if (nrows > shown)
        buf_printf(&t, "… %lld rows not shown …\n", nrows - shown);
    for (size_t i = 0; i < json_array_size(tr); i++)
        s_row(&t, ti, tr, i);
out:
    s_emit(b, &t, budget);
    if (t.len > budget)
        buf_puts(b, "\n");
    buf_release(&t);
}

/* ---- E2B ----------------------------------------------------------------- */

static const char *
s_e2b_scale(const char *scale)
{
    if (!scale)
        return "linear";
    return !strcmp(scale, "date") ? "datetime" : scale;
}

static void
s_e2b_axes(json_t *out, const json_t *c)
{
    static const char *const names[] = {"x", "y"};
    for (size_t k = 0; k < 2; k++) {
        const json_t *axis = json_object_get(c, names[k]);
        char key[32];
        snprintf(key, sizeof key, "%s_label", names[k]);
        json_object_set_new(
            out, key,
            json_string_nocheck(jget_str(axis, "label", NULL)
                                    ? jget_str(axis, "label", NULL)
                                    : ""));
        snprintf(key, sizeof key, "%s_unit", names[k]);
        json_object_set(out, key,
                        jget_str(axis, "unit", NULL)
                            ? json_object_get(axis, "unit")
                            : json_null());
        snprintf(key, sizeof key, "%s_scale", names[k]);
        json_object_set_new(
            out, key, json_string(s_e2b_scale(jget_str(axis, "scale", NULL))));
        snprintf(key, sizeof key, "%s_ticks", names[k]);
        json_t *ticks = json_object_get(axis, "ticks");
        json_object_set_new(out, key, ticks ? json_copy(ticks) : json_array());
        snprintf(key, sizeof key, "%s_tick_labels", names[k]);
        json_t *tl = json_object_get(axis, "tick_labels");
        json_object_set_new(out, key, tl ? json_copy(tl) : json_array());
    }
}

static json_t *
s_e2b_elements(const char *type, const json_t *els)
{
    json_t *out = json_array(), *el;
    size_t i, j;
    json_array_foreach(els, i, el)
    {
        const json_t *label = json_object_get(el, "label");
        if (!strcmp(type, "line") || !strcmp(type, "scatter")) {
            json_t *pts = json_array();
            const json_t *x = json_object_get(el, "x");
            const json_t *y = json_object_get(el, "y");
            for (j = 0; j < json_array_size(y); j++)
                json_array_append_new(pts,
                                      json_pack("[OO]", json_array_get(x, j),
                                                json_array_get(y, j)));
            json_array_append_new(
                out,
                json_pack("{s:s, s:o}", "label",
                          json_is_string(label) ? json_string_value(label) : "",
                          "points", pts));
        } else if (!strcmp(type, "bar") || !strcmp(type, "pie") ||
                   !strcmp(type, "box")) {
            json_t *o = json_copy(el);
            if (!json_is_string(label))
                json_object_set_new(o, "label", json_string(""));
            if (!strcmp(type, "bar") &&
                !json_is_string(json_object_get(o, "group")))
                json_object_set_new(o, "group", json_string(""));
            json_object_del(o, "fraction");
            json_object_del(o, "base");
            json_array_append_new(out, o);
        } else if (!strcmp(type, "histogram")) {
            const json_t *edges = json_object_get(el, "edges");
            const json_t *counts = json_object_get(el, "counts");
            json_t *v;
            json_array_foreach(counts, j, v)
            {
                buf_t l;
                buf_init(&l, 0);
                s_val(&l, json_array_get(edges, j));
                buf_puts(&l, "–");
                s_val(&l, json_array_get(edges, j + 1));
                json_array_append_new(
                    out,
                    json_pack("{s:s, s:s, s:O}", "label", buf_cstr(&l), "group",
                              json_is_string(label) ? json_string_value(label)
                                                    : "",
                              "value", v));
                buf_release(&l);
            }
        }
    }
    return out;
}

static json_t *
s_e2b_one(const json_t *c)
{
    const char *type =
        jget_str(c, "type", NULL) ? jget_str(c, "type", NULL) : "unknown";
    const char *etype = !strcmp(type, "box")         ? "box_and_whisker"
                        : !strcmp(type, "histogram") ? "bar"
                        : (!strcmp(type, "line") || !strcmp(type, "scatter") ||
                           !strcmp(type, "bar") || !strcmp(type, "pie"))
                            ? type
                            : "unknown";
    json_t *out =
        json_pack("{s:s, s:s}", "type", etype, "title",
                  jget_str(c, "title", NULL) ? jget_str(c, "title", NULL) : "");
    if (strcmp(type, "pie") && strcmp(type, "unknown"))
        s_e2b_axes(out, c);
    json_object_set_new(out, "elements",
                        s_e2b_elements(type, json_object_get(c, "elements")));
    return out;
}

json_t *
ag_chart_e2b(const json_t *chart)
{
    const json_t *charts = json_object_get(chart, "charts");
    size_t n = json_array_size(charts);
    if (n == 0)
        return NULL;
    if (n == 1)
        return s_e2b_one(json_array_get(charts, 0));
    json_t *els = json_array(), *c;
    size_t i;
    json_array_foreach(charts, i, c) json_array_append_new(els, s_e2b_one(c));
    const char *title = jget_str(chart, "title", NULL);
    return json_pack("{s:s, s:s, s:o}", "type", "superchart", "title",
                     title ? title : "", "elements", els);
}

json_t *
ag_table_e2b(const json_t *table)
{
    const json_t *cols = json_object_get(table, "columns");
    if (!json_is_array(cols))
        return NULL;
    json_t *out = json_object(), *c;
    size_t j;
    static const char *const parts[] = {"head", "tail"};
    json_array_foreach(cols, j, c)
    {
        json_t *vals = json_array();
        for (size_t p = 0; p < 2; p++) {
            const json_t *rows =
                json_object_get(json_object_get(table, parts[p]), "rows");
            size_t i;
            json_t *r;
            json_array_foreach(rows, i, r) json_array_append(
                vals,
                json_array_get(r, j) ? json_array_get(r, j) : json_null());
        }
        const char *name = jget_str(c, "name", NULL);
        json_object_set_new(out, name ? name : "", vals);
    }
    return out;
}

void
ag_chart_structured(json_t *sc, const json_t *outputs)
{
    json_t *charts = json_array(), *tables = json_array(), *o;
    size_t i;
    json_array_foreach(outputs, i, o)
    {
        const json_t *data = json_object_get(o, "data");
        json_t *c = json_object_get(data, AG_OUTPUTS_CHART_MIME);
        json_t *t = json_object_get(data, AG_OUTPUTS_TABLE_MIME);
        if (json_is_object(c))
            json_array_append(charts, c);
        if (json_is_object(t))
            json_array_append(tables, t);
    }
    if (json_array_size(charts))
        json_object_set(sc, "charts", charts);
    if (json_array_size(tables))
        json_object_set(sc, "tables", tables);
    json_decref(charts);
    json_decref(tables);
}
