/* ag_chart: the text the model reads for a figure's chart data and a
 * frame's table data, and the E2B SDK's chart and data shapes. */
#include "agent/loop/ag_chart.h"
#include "tests/tap.h"

#include <stdbool.h>
#include <string.h>

static json_t *
s_j(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v)
        diag("bad test JSON: %s", e.text);
    return v;
}

/* json_equal against JSON text, freeing what it loaded. */
static bool
s_eq(const json_t *a, const char *text)
{
    json_t *b = s_j(text);
    bool same = json_equal(a, b);
    json_decref(b);
    return same;
}

static char *
s_chart(const char *json, size_t budget)
{
    json_t *v = s_j(json);
    buf_t b;
    buf_init(&b, 0);
    ag_chart_text(&b, v, budget);
    json_decref(v);
    return buf_detach(&b, NULL);
}

#define BAR                                                                    \
    "{\"version\":1,\"charts\":[{\"type\":\"bar\",\"title\":\"Revenue by "     \
    "region\",\"x\":{\"label\":null,\"scale\":\"categorical\",\"ticks\":[0,"   \
    "1,2],\"tick_labels\":[\"north\",\"south\",\"east\"]},\"y\":{\"label\":"   \
    "\"USD (k)\",\"unit\":\"k\",\"scale\":\"linear\",\"ticks\":[0,20],"        \
    "\"tick_labels\":[\"0\",\"20\"]},\"orientation\":\"vertical\","            \
    "\"layout\":\"single\",\"elements\":[{\"label\":\"north\",\"group\":"      \
    "null,\"value\":17},{\"label\":\"south\",\"group\":null,\"value\":42},"    \
    "{\"label\":\"east\",\"group\":null,\"value\":23}]}]}"

int
main(void)
{
    char *t = s_chart(BAR, AG_CHART_TEXT_BUDGET);
    is_str(t,
           "[bar chart 'Revenue by region', y: USD (k); north 17, south 42, "
           "east 23]\n",
           "a bar chart reads as its title, axes and bars");
    free(t);

    /* 10 000 points: the text stays within its budget and says so. */
    json_t *big = s_j("{\"version\":1,\"charts\":[{\"type\":\"line\","
                      "\"title\":null,\"x\":{},\"y\":{},\"elements\":[{"
                      "\"label\":\"s\",\"x\":[],\"y\":[]}]}]}");
    json_t *el = json_array_get(
        json_object_get(json_array_get(json_object_get(big, "charts"), 0),
                        "elements"),
        0);
    for (int i = 0; i < 10000; i++) {
        json_array_append_new(json_object_get(el, "x"), json_integer(i));
        json_array_append_new(json_object_get(el, "y"), json_real(i * 0.5));
    }
    buf_t b;
    buf_init(&b, 0);
    ag_chart_text(&b, big, 300);
    ok(b.len <= 300 + 8, "10 000 points give at most the budget (%zu bytes)",
       b.len);
    ok(strstr(buf_cstr(&b), "'s' 10000 points, x 0..9999, y 0..5000") != NULL,
       "a long series is summarised by count and range: %s", buf_cstr(&b));
    buf_release(&b);

    /* E2B: a single chart, its axes and bars in the SDK's fields. */
    json_t *bar = s_j(BAR);
    json_t *e = ag_chart_e2b(bar);
    is_str(json_string_value(json_object_get(e, "type")), "bar", "E2B type");
    is_str(json_string_value(json_object_get(e, "y_label")), "USD (k)",
           "E2B y_label");
    is_str(json_string_value(json_object_get(e, "x_scale")), "categorical",
           "E2B x_scale");
    json_t *first = json_array_get(json_object_get(e, "elements"), 0);
    ok(s_eq(first, ("{\"label\":\"north\",\"group\":\"\","
                    "\"value\":17}")),
       "E2B bar element {label, group, value}");
    json_decref(e);
    /* a line chart's points as [x, y] pairs; several axes: a superchart */
    e = ag_chart_e2b(big);
    json_t *pts = json_object_get(
        json_array_get(json_object_get(e, "elements"), 0), "points");
    ok(s_eq(json_array_get(pts, 3), "[3, 1.5]"),
       "E2B line points are [x, y] pairs");
    json_decref(e);
    json_array_append(json_object_get(big, "charts"),
                      json_array_get(json_object_get(bar, "charts"), 0));
    e = ag_chart_e2b(big);
    is_str(json_string_value(json_object_get(e, "type")), "superchart",
           "a figure with two axes is an E2B superchart");
    is_int((long long)json_array_size(json_object_get(e, "elements")), 2,
           "... of its two charts");
    json_decref(e);
    json_decref(big);
    json_decref(bar);

    /* tables */
    json_t *tab = s_j(
        "{\"version\":1,\"kind\":\"dataframe\",\"shape\":[20,2],\"index\":{"
        "\"name\":null,\"dtype\":\"int64\"},\"columns\":[{\"name\":\"region\","
        "\"dtype\":\"object\"},{\"name\":\"v\",\"dtype\":\"float64\"}],"
        "\"head\":{\"index\":[0,1],\"rows\":[[\"n\",0.5],[\"s\",1]]},"
        "\"tail\":{\"index\":[19],\"rows\":[[\"s\",null]]}}");
    buf_init(&b, 0);
    ag_table_text(&b, tab, AG_TABLE_TEXT_BUDGET);
    is_str(buf_cstr(&b),
           "DataFrame: 20 rows × 2 columns\n"
           "index | region (object) | v (float64)\n"
           "0 | n | 0.5\n1 | s | 1\n… 17 rows not shown …\n19 | s | null\n",
           "a DataFrame reads as shape, dtypes, first and last rows");
    buf_release(&b);
    e = ag_table_e2b(tab);
    ok(s_eq(e, ("{\"region\":[\"n\",\"s\",\"s\"],\"v\":[0.5,1,"
                "null]}")),
       "E2B data: {column: values}");
    json_decref(e);
    json_decref(tab);
    return done_testing();
}
