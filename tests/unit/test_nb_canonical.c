/*
 * test_nb_canonical: the pieces of nbformat's exact output format, checked
 * against values Python itself produced; and, with arguments, a small tool
 * the interop tests (tests/interop/test_nb_roundtrip.py) drive:
 *
 *   test_nb_canonical                      TAP checks
 *   test_nb_canonical --roundtrip IN OUT   read IN, write OUT (exit = err code)
 *   test_nb_canonical --record OUT         record a small session into OUT
 *   test_nb_canonical --validate IN        read IN, run the C-side check
 */
#include "../tap.h"

#include "common/buf.h"
#include "common/err.h"
#include "notebook-io/nb_json.h"
#include "notebook-io/nb_notebook.h"
#include "notebook-io/nb_record.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>

static int
s_roundtrip(const char *in, const char *out)
{
    err_t err = {0};
    nb_notebook_t *nb = nb_notebook_read_file(in, &err);
    if (!nb) {
        fprintf(stderr, "%s\n", err.text);
        return err.code;
    }
    if (nb_notebook_warnings(nb))
        fputs(nb_notebook_warnings(nb), stderr);
    if (nb_notebook_write_file(nb, out, &err)) {
        fprintf(stderr, "%s\n", err.text);
        nb_notebook_destroy(&nb);
        return err.code;
    }
    nb_notebook_destroy(&nb);
    return 0;
}

static int
s_validate(const char *in)
{
    err_t err = {0};
    nb_notebook_t *nb = nb_notebook_read_file(in, &err);
    int rc = nb ? nb_notebook_validate(nb, &err) : -1;
    nb_notebook_destroy(&nb);
    if (rc) {
        fprintf(stderr, "%s\n", err.text);
        return err.code;
    }
    return 0;
}

/* A session as the agent records it: a prompt, an answer, executions with
 * stream, rich, error and updated display outputs, an unexecuted cell. */
static int
s_record(const char *out)
{
    err_t err = {0};
    nb_record_t *rec = nb_record_new();
    json_t *info = json_pack(
        "{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i}, s:s}}",
        "implementation", "ipython", "language_info", "name", "python",
        "version", "3.11.2", "mimetype", "text/x-python", "file_extension",
        ".py", "pygments_lexer", "ipython3", "codemirror_mode", "name",
        "ipython", "version", 3, "nbconvert_exporter", "python");
    json_t *outs1 = json_pack(
        "[{s:s, s:s, s:s}, {s:s, s:{s:s}, s:{}, s:i}]", "output_type", "stream",
        "name", "stdout", "text", "rows: 3\nmean: 2.5\n", "output_type",
        "execute_result", "data", "text/plain", "   a  b\n0  1  2\n1  3  4",
        "metadata", "execution_count", 1);
    json_t *outs2 = json_pack(
        "[{s:s, s:{s:s, s:s}, s:{s:{s:i, s:i}}}]", "output_type",
        "display_data", "data", "image/png",
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwAD"
        "hgGAWjR9awAAAABJRU5ErkJggg==",
        "text/plain", "<Figure size 640x480 with 1 Axes>", "metadata",
        "image/png", "width", 640, "height", 480);
    json_t *outs3 = json_pack(
        "[{s:s, s:s, s:s, s:[s, s]}]", "output_type", "error", "ename",
        "ZeroDivisionError", "evalue", "division by zero", "traceback",
        "\x1b[0;31mZeroDivisionError\x1b[0m", "division by zero");
    int rc = 1;

    nb_record_set_kernel(rec, info, "python3", "Python 3 (ipykernel)");
    nb_record_add_markdown(rec, "Summarise **sales.csv**, please.\n");
    nb_record_add_markdown(rec, "I'll load the file first.");
    nb_record_add_code(rec, "import pandas as pd\ndf = pd.read_csv('x')\ndf",
                       outs1, 1, "2024-01-31T12:00:00.000001Z",
                       "2024-01-31T12:00:00.500000Z");
    nb_record_add_code(rec, "df.plot()", outs2, 2,
                       "2024-01-31T12:00:01.000000Z",
                       "2024-01-31T12:00:02.000000Z");
    /* A display updated in place after recording shows in the notebook. */
    json_object_set_new(json_object_get(json_array_get(outs2, 0), "data"),
                        "text/plain",
                        json_string("<Figure size 640x480 with 2 Axes>"));
    nb_record_add_code(rec, "1/0", outs3, 3, "2024-01-31T12:00:03.000000Z",
                       "2024-01-31T12:00:03.100000Z");
    nb_record_add_code(rec, "", NULL, -1, NULL, NULL);
    nb_record_set_metadata(
        rec, "jupyter_agent",
        json_pack("{s:s, s:{s:i, s:i}, s:f}", "model", "replay:demo", "usage",
                  "input_tokens", 1200, "output_tokens", 340, "seconds", 3.25));
    if (nb_record_save(rec, out, &err))
        fprintf(stderr, "%s\n", err.text);
    else
        rc = 0;
    json_decref(info);
    json_decref(outs1);
    json_decref(outs2);
    json_decref(outs3);
    nb_record_destroy(&rec);
    return rc;
}

struct float_case {
    double d;         /* the value */
    const char *repr; /* json.dumps(d) in Python 3 */
};

static const struct float_case floats[] = {
    {0x1.999999999999ap-4, "0.1"},
    {0x1.0000000000000p+0, "1.0"},
    {-0x0.0p+0, "-0.0"},
    {0x0.0p+0, "0.0"},
    {0x1.1c37937e08000p+53, "1e+16"},
    {0x1.c6bf526340000p+49, "1000000000000000.0"},
    {0x1.1c37937e07fffp+53, "9999999999999998.0"},
    {0x1.4f8b588e368f1p-17, "1e-05"},
    {0x1.a36e2eb1c432dp-14, "0.0001"},
    {0x1.02e4b6ce5dc68p-13, "0.00012345"},
    {0x1.b69b4ba630f35p+56, "1.2345678901234568e+17"},
    {0x0.0000000000001p-1022, "5e-324"},
    {0x1.fffffffffffffp+1023, "1.7976931348623157e+308"},
    {0x1.3333333333334p-2, "0.30000000000000004"},
    {0x1.4000000000000p+1, "2.5"},
    {0x1.9000000000000p+6, "100.0"},
    {0x1.0f0cf064dd592p+73, "1e+22"},
    {-0x1.421f5f40d8376p-23, "-1.5e-07"},
    {0x1.0000000000001p+53, "9007199254740994.0"},
    {0x1.5555555555555p-2, "0.3333333333333333"},
    {0x1.edd2f1a9fbe77p+6, "123.456"},
    {0x1.249ad2594c37dp+332, "1e+100"},
    {0x1.1eb2d66005835p+997, "1.5e+300"},
    {0x1.1666666666666p+2, "4.35"},
    {0x1.ad7f29abcaf48p-24, "1e-07"},
    {0x1.c12216116c000p+46, "123456780000000.0"},
};

static void
s_check_floats(void)
{
    char out[NB_JSON_FLOAT_SIZE];
    int bad = 0;
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        nb_json_repr_float(floats[i].d, out);
        if (strcmp(out, floats[i].repr)) {
            diag("  repr of %a: got %s, Python writes %s", floats[i].d, out,
                 floats[i].repr);
            bad++;
        }
    }
    ok(bad == 0, "floats are written as Python's repr writes them (%zu cases)",
       sizeof floats / sizeof floats[0]);
    nb_json_repr_float(NAN, out);
    is_str(out, "NaN", "NaN is written as json.dumps writes it");
    nb_json_repr_float(-INFINITY, out);
    is_str(out, "-Infinity", "-inf is written as json.dumps writes it");
}

static void
s_check_strings(void)
{
    buf_t b;
    buf_init(&b, 0);
    nb_json_dump_string(
        &b, "a/b\"c\\d\x01\x1f\x7f\b\f\n\r\t\xc3\xa9\xe2\x80\xa8", 20);
    is_str(buf_cstr(&b),
           "\"a/"
           "b\\\"c\\\\d\\u0001\\u001f\x7f\\b\\f\\n\\r\\t\xc3\xa9\xe2\x80\xa8\"",
           "strings escape only quote, backslash and control characters "
           "(lowercase \\u00XX), keeping '/', DEL and non-ASCII raw");
    buf_reset(&b);
    nb_json_dump_string(&b, "x\0y", 3);
    is_str(buf_cstr(&b), "\"x\\u0000y\"", "a NUL inside a string is escaped");
    buf_release(&b);
}

static void
s_check_layout(void)
{
    json_t *v = json_loads("{\"b\": [1, [], {}, {\"z\": null, \"a\": true}],"
                           " \"a\": \"\", \"\xc3\xa9\": 1.0, \"Z\": false}",
                           0, NULL);
    char *text = nb_json_dumps(v, NULL);
    is_str(text,
           "{\n \"Z\": false,\n \"a\": \"\",\n \"b\": [\n  1,\n  [],\n  {},\n"
           "  {\n   \"a\": true,\n   \"z\": null\n  }\n ],\n \"\xc3\xa9\": "
           "1.0\n}",
           "layout is json.dumps(indent=1, sort_keys=True): one space per "
           "level, [] and {} when empty, keys in code point order");
    free(text);
    json_decref(v);
}

/* Lines of `s` as "|"-joined pieces, per nb_json_line_end. */
static char *
s_lines(const char *s)
{
    static char out[256];
    size_t len = strlen(s), o = 0;
    for (size_t pos = 0; pos < len;) {
        size_t end = nb_json_line_end(s, len, pos);
        if (pos)
            out[o++] = '|';
        memcpy(out + o, s + pos, end - pos);
        o += end - pos;
        pos = end;
    }
    out[o] = '\0';
    return out;
}

static void
s_check_splitlines(void)
{
    is_str(s_lines("a\nb\r\nc\rd"), "a\n|b\r\n|c\r|d",
           "lines split after \\n, \\r\\n and \\r, keeping terminators");
    is_str(s_lines("a\vb\fc\x1c"
                   "d\x1d"
                   "e\x1e"
                   "f"),
           "a\v|b\f|c\x1c|d\x1d|e\x1e|f",
           "\\v, \\f and \\x1c-\\x1e end lines, as in str.splitlines");
    is_str(s_lines("a\xc2\x85"
                   "b\xe2\x80\xa8"
                   "c\xe2\x80\xa9"
                   "d\xe2\x80\xa7"),
           "a\xc2\x85|b\xe2\x80\xa8|c\xe2\x80\xa9|d\xe2\x80\xa7",
           "U+0085, U+2028 and U+2029 end lines; U+2027 does not");
    is_str(s_lines("x\n\n"), "x\n|\n", "an empty line is its own line");
}

int
main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--roundtrip"))
        return s_roundtrip(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "--record"))
        return s_record(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--validate"))
        return s_validate(argv[2]);
    if (argc != 1) {
        fprintf(stderr,
                "usage: %s [--roundtrip IN OUT | --record OUT | "
                "--validate IN]\n",
                argv[0]);
        return 2;
    }
    s_check_floats();
    s_check_strings();
    s_check_layout();
    s_check_splitlines();
    return done_testing();
}
