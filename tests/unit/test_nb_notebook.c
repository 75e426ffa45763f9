/*
 * test_nb_notebook: reading, normalising and writing notebooks, and the
 * session recorder.
 */
#include "../tap.h"

#include "common/err.h"
#include "notebook-io/nb_notebook.h"
#include "notebook-io/nb_record.h"

#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/test_nb_notebook.XXXXXX";

static nb_notebook_t *
s_read(const char *text, err_t *err)
{
    err_clear(err);
    return nb_notebook_read_mem(text, strlen(text), "t.ipynb", err);
}

/* Does reading `text` fail with ERR_USAGE and a message containing `want`? */
static int
s_fails_with(const char *text, const char *want)
{
    err_t err = {0};
    nb_notebook_t *nb = s_read(text, &err);
    int good = !nb && err.code == ERR_USAGE && strstr(err.text, want);
    if (!good)
        diag("  got: %s (code %d), want: ...%s...",
             nb ? "a notebook" : err.text, err.code, want);
    nb_notebook_destroy(&nb);
    return good;
}

#define NB_HEAD "{\"nbformat\": 4, \"nbformat_minor\": 5, \"metadata\": {}, "

/* `text` reads with a warning containing `want`. */
static void
s_reads_with_warning(const char *text, const char *want, const char *what)
{
    err_t err = {0};
    nb_notebook_t *nb =
        nb_notebook_read_mem(text, strlen(text), "t.ipynb", &err);
    const char *w = nb ? nb_notebook_warnings(nb) : NULL;
    ok(w && strstr(w, want), "%s", what);
    if (!w)
        diag("  got: %s", nb ? "no warning" : err.text);
    nb_notebook_destroy(&nb);
}

/* `text` reads, and the written notebook contains `want`. */
static void
s_reads_byte_exact(const char *text, const char *want, const char *what)
{
    err_t err = {0};
    nb_notebook_t *nb =
        nb_notebook_read_mem(text, strlen(text), "t.ipynb", &err);
    char *out = nb ? nb_notebook_write_mem(nb, NULL) : NULL;
    ok(out && strstr(out, want), "%s", what);
    if (!out || !strstr(out, want))
        diag("  got: %s", out ? out : err.text);
    free(out);
    nb_notebook_destroy(&nb);
}

static void
s_test_errors(void)
{
    ok(s_fails_with("{\n \"cells\": [\n  {,\n",
                    "t.ipynb: invalid JSON at line 3, column 4"),
       "a JSON syntax error names the file, line and column");
    ok(s_fails_with(
           "{\"nbformat\": 2, \"nbformat_minor\": 0, \"worksheets\": []}",
           "t.ipynb is nbformat 2; convert it with 'jupyter nbconvert "
           "--to notebook --nbformat 4'"),
       "an nbformat 2 notebook is refused with the command that converts it");
    ok(s_fails_with("{\"nbformat\": 5, \"nbformat_minor\": 0}",
                    "is nbformat 5"),
       "an unknown future major version is refused");
    ok(s_fails_with("[1, 2]", "not a notebook"),
       "a JSON document that is not an object is refused");
    ok(s_fails_with("{\"cells\": [], \"metadata\": {}}", "no \"nbformat\""),
       "a missing nbformat version is reported");
    ok(s_fails_with("{\"nbformat\": 4, \"cells\": [], \"metadata\": {}}",
                    "nbformat_minor"),
       "a missing nbformat_minor is reported");
    ok(s_fails_with("{\"nbformat\": 4, \"nbformat_minor\": 5, \"cells\": []}",
                    "no \"metadata\" object"),
       "missing notebook metadata is reported");
    ok(s_fails_with(
           "{\"nbformat\": 4, \"nbformat_minor\": 5, \"metadata\": {}}",
           "no \"cells\" list"),
       "a missing cells list is reported");
    ok(s_fails_with(NB_HEAD "\"cells\": [{\"cell_type\": \"raw\", \"source\": "
                            "\"\", \"metadata\": {}}, {\"source\": \"\"}]}",
                    "cell 2 has no \"cell_type\""),
       "a cell without cell_type is named by its number (from 1)");
    s_reads_with_warning(NB_HEAD "\"cells\": [{\"cell_type\": \"markdown\", "
                                 "\"metadata\": {}}]}",
                         "cell 1 (markdown) has no \"source\"",
                         "a cell without source is read (as nbformat does) "
                         "with a warning naming it");
    ok(s_fails_with(NB_HEAD "\"cells\": [{\"cell_type\": \"markdown\", "
                            "\"source\": \"x\"}]}",
                    "cell 1 (markdown) has no \"metadata\""),
       "a cell without metadata is named");
    ok(s_fails_with(NB_HEAD "\"cells\": [{\"cell_type\": \"code\", "
                            "\"metadata\": {}, \"source\": [\"a\", 1]}]}",
                    "\"source\" must be a string or a list of strings"),
       "a source list holding a non-string is refused");
    ok(s_fails_with(NB_HEAD "\"cells\": [{\"cell_type\": \"code\", "
                            "\"metadata\": {}, \"source\": \"\"}]}",
                    "cell 1 (code) has no \"outputs\" list"),
       "a code cell without outputs is refused");
    ok(s_fails_with(NB_HEAD "\"cells\": [{\"cell_type\": \"code\", "
                            "\"metadata\": {}, \"source\": \"\", "
                            "\"execution_count\": null, \"outputs\": [{}]}]}",
                    "cell 1 (code), output 1 has no \"output_type\""),
       "an output without output_type is named by cell and output");
    s_reads_byte_exact(NB_HEAD "\"cells\": [], \"x\": 99999999999999999999}",
                       "\"x\": 99999999999999999999",
                       "an integer beyond 64 bits is read and written back "
                       "unchanged, as Python does");
    s_reads_byte_exact(NB_HEAD "\"cells\": [], \"x\": [NaN, -Infinity]}",
                       "\"x\": [\n  NaN,\n  -Infinity\n ]",
                       "NaN and -Infinity are read and written back as "
                       "Python's json writes them");
    s_reads_byte_exact(NB_HEAD "\"cells\": [], \"x\": \"a\\ud800\"}",
                       "\"x\": \"a\\ud800\"",
                       "a lone surrogate escape is read and written back as "
                       "the same escape");
    ok(s_fails_with(NB_HEAD "\"cells\": [{\"cell_type\": \"markdown\", "
                            "\"metadata\": {}, \"source\": [\"a\\n\", "
                            "-Infinity]}]}",
                    "\"source\" must be a string or a list of strings"),
       "a source list holding -Infinity is refused, as nbformat refuses it "
       "(it is a number, not text)");
    s_reads_byte_exact(NB_HEAD "\"cells\": [{\"cell_type\": \"code\", "
                               "\"metadata\": {}, \"source\": \"\", "
                               "\"execution_count\": null, \"outputs\": "
                               "[{\"output_type\": \"display_data\", "
                               "\"metadata\": {}, \"data\": {\"text/plain\": "
                               "[\"x\\n\", NaN]}}]}]}",
                       "\"text/plain\": [\n       \"x\\n\",\n       NaN\n",
                       "a mime bundle list holding NaN is kept as a list "
                       "(not joined into invalid text), as nbformat keeps it");
    s_reads_byte_exact(NB_HEAD "\"cells\": [], \"x\": [1, 9223372036854775808, "
                               "-9223372036854775809]}",
                       "9223372036854775808,\n  -9223372036854775809\n",
                       "the first integers past 64 bits (19 digits) are read "
                       "and written back unchanged");
    {
        /* 1e309 written out: past the double range without an exponent. */
        char text[600], *p = text;
        p += sprintf(p, "%s", NB_HEAD "\"cells\": [], \"x\": 1");
        memset(p, '0', 309), p += 309;
        sprintf(p, ".5}");
        s_reads_byte_exact(text, "\"x\": Infinity",
                           "a float past the double range written without "
                           "an exponent reads as Infinity, as in Python");
    }
    s_reads_byte_exact(NB_HEAD "\"cells\": [], \"x\": \"q\\\"\\\\\", "
                               "\"y\": \"\\\\\\\"\\ud800\", "
                               "\"z\\udc00\": 1}",
                       "\"y\": \"\\\\\\\"\\ud800\",\n \"z\xef\xbf\xbd\": 1",
                       "a lone surrogate after escaped quotes and "
                       "backslashes is kept as its escape, and one in a key "
                       "becomes U+FFFD as in Python");
    s_reads_byte_exact("{\"nbformat\": 3, \"nbformat_minor\": 0, "
                       "\"metadata\": {\"name\": \"n\"}, \"worksheets\": "
                       "[{\"cells\": [{\"cell_type\": \"heading\", "
                       "\"level\": 2, \"source\": [\"A\", \"B\"], "
                       "\"metadata\": {}}]}]}",
                       "\"## A B\"",
                       "an nbformat 3 heading cell becomes a markdown heading "
                       "on one line, as nbformat.v4.convert does");

    err_t err = {0};
    nb_notebook_t *nb = nb_notebook_read_file("/nonexistent/n.ipynb", &err);
    ok(!nb && err.code == ERR_USAGE &&
           strstr(err.text, "/nonexistent/n.ipynb") &&
           strstr(err.text, "No such file"),
       "a missing file is reported with its path and the reason");
}

/* The value at "key/index/..." below root; mime keys may contain one '/'
 * (a segment that is no key is joined with the next). Borrowed. */
static json_t *
s_at(json_t *root, const char *path)
{
    json_t *v = root;
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", path);
    char key[256] = "";
    for (char *tok = strtok_r(buf, "/", &save); tok && v;
         tok = strtok_r(NULL, "/", &save)) {
        if (json_is_array(v)) {
            v = json_array_get(v, strtoul(tok, NULL, 10));
            continue;
        }
        if (*key)
            strncat(key, "/", sizeof key - strlen(key) - 1);
        strncat(key, tok, sizeof key - strlen(key) - 1);
        if (json_object_get(v, key)) {
            v = json_object_get(v, key);
            key[0] = '\0';
        }
    }
    return key[0] ? NULL : v;
}

static const char *
s_string_at(json_t *root, const char *path)
{
    return json_string_value(s_at(root, path));
}

static void
s_test_normalise_and_roundtrip(void)
{
    err_t err = {0};
    const char *text =
        "\xef\xbb\xbf{\"nbformat\": 4, \"nbformat_minor\": 5, \"x_top\": "
        "{\"k\": [1, 2.5]},\n"
        "\"metadata\": {\"signature\": \"sha256:x\", \"custom\": {\"n\": "
        "1e-05}},\n"
        "\"cells\": [\n"
        "{\"id\": \"c1\", \"cell_type\": \"code\", \"metadata\": {\"trusted\": "
        "true, \"tags\": [\"t\"]},\n"
        " \"source\": [\"a = 1\\n\", \"b = \", \"2\\n\", \"c\"], "
        "\"execution_count\": 3, \"x_cell\": \"kept\",\n"
        " \"outputs\": [\n"
        "  {\"output_type\": \"stream\", \"name\": \"stdout\", \"text\": "
        "[\"x\\n\", \"y\"]},\n"
        "  {\"output_type\": \"display_data\", \"metadata\": {}, \"data\": {\n"
        "    \"text/plain\": [\"l1\\n\", \"l2\"], \"image/png\": [\"iVBO\", "
        "\"Rw==\\n\"],\n"
        "    \"application/json\": {\"a\": [\"not\\n\", \"joined\"]}}}]},\n"
        "{\"id\": \"c2\", \"cell_type\": \"markdown\", \"metadata\": {}, "
        "\"source\": \"\\u0000nul and \\u00e9\\r\\nnext\"}]}";
    nb_notebook_t *nb = s_read(text, &err);
    if (!ok(nb != NULL, "a notebook with a byte order mark and unknown fields "
                        "is read")) {
        diag("  %s", err.text);
        return;
    }
    json_t *root = nb_notebook_json(nb);
    json_t *cell = nb_notebook_cell(nb, 0);

    is_str(nb_cell_source(cell), "a = 1\nb = 2\nc",
           "a source stored as a list of lines is joined on read");
    is_str(s_string_at(root, "cells/0/outputs/0/text"), "x\ny",
           "stream text stored as lines is joined on read");
    is_str(s_string_at(root, "cells/0/outputs/1/data/text/plain"), "l1\nl2",
           "text mime data stored as lines is joined on read");
    is_str(s_string_at(root, "cells/0/outputs/1/data/image/png"), "iVBORw==\n",
           "image/png data stored as lines is joined too (as nbformat does)");
    ok(json_is_array(s_at(root, "cells/0/outputs/1/data/application/json/a")),
       "application/json data stays a JSON value, not text");
    ok(!json_object_get(nb_notebook_metadata(nb), "signature") &&
           !json_object_get(json_object_get(cell, "metadata"), "trusted"),
       "transient keys (signature, trusted) are dropped on read");
    is_int(
        json_string_length(json_object_get(nb_notebook_cell(nb, 1), "source")),
        17, "a NUL inside a string survives reading");

    size_t len;
    char *out = nb_notebook_write_mem(nb, &len);
    const char *want = "{\n"
                       " \"cells\": [\n"
                       "  {\n"
                       "   \"cell_type\": \"code\",\n"
                       "   \"execution_count\": 3,\n"
                       "   \"id\": \"c1\",\n"
                       "   \"metadata\": {\n"
                       "    \"tags\": [\n"
                       "     \"t\"\n"
                       "    ]\n"
                       "   },\n"
                       "   \"outputs\": [\n"
                       "    {\n"
                       "     \"name\": \"stdout\",\n"
                       "     \"output_type\": \"stream\",\n"
                       "     \"text\": [\n"
                       "      \"x\\n\",\n"
                       "      \"y\"\n"
                       "     ]\n"
                       "    },\n"
                       "    {\n"
                       "     \"data\": {\n"
                       "      \"application/json\": {\n"
                       "       \"a\": [\n"
                       "        \"not\\n\",\n"
                       "        \"joined\"\n"
                       "       ]\n"
                       "      },\n"
                       "      \"image/png\": \"iVBORw==\\n\",\n"
                       "      \"text/plain\": [\n"
                       "       \"l1\\n\",\n"
                       "       \"l2\"\n"
                       "      ]\n"
                       "     },\n"
                       "     \"metadata\": {},\n"
                       "     \"output_type\": \"display_data\"\n"
                       "    }\n"
                       "   ],\n"
                       "   \"source\": [\n"
                       "    \"a = 1\\n\",\n"
                       "    \"b = 2\\n\",\n"
                       "    \"c\"\n"
                       "   ],\n"
                       "   \"x_cell\": \"kept\"\n"
                       "  },\n"
                       "  {\n"
                       "   \"cell_type\": \"markdown\",\n"
                       "   \"id\": \"c2\",\n"
                       "   \"metadata\": {},\n"
                       "   \"source\": [\n"
                       "    \"\\u0000nul and \xc3\xa9\\r\\n\",\n"
                       "    \"next\"\n"
                       "   ]\n"
                       "  }\n"
                       " ],\n"
                       " \"metadata\": {\n"
                       "  \"custom\": {\n"
                       "   \"n\": 1e-05\n"
                       "  }\n"
                       " },\n"
                       " \"nbformat\": 4,\n"
                       " \"nbformat_minor\": 5,\n"
                       " \"x_top\": {\n"
                       "  \"k\": [\n"
                       "   1,\n"
                       "   2.5\n"
                       "  ]\n"
                       " }\n"
                       "}\n";
    ok(len == strlen(want) && memcmp(out, want, len) == 0,
       "written back in nbformat's layout: lines split, unknown fields kept, "
       "keys sorted, raw UTF-8, Python floats, trailing newline");
    if (len != strlen(want) || memcmp(out, want, len))
        diag("  got:\n%s", out);
    nb_notebook_destroy(&nb);

    nb = nb_notebook_read_mem(out, len, "again", &err);
    size_t len2;
    char *out2 = nb ? nb_notebook_write_mem(nb, &len2) : NULL;
    ok(out2 && len2 == len && memcmp(out, out2, len) == 0,
       "reading and writing our own output changes nothing");
    free(out);
    free(out2);
    nb_notebook_destroy(&nb);
}

static void
s_test_ids(void)
{
    err_t err = {0};
    char id[NB_CELL_ID_SIZE];
    int hex = 1, distinct = 1;
    char seen[100][NB_CELL_ID_SIZE];

    for (int i = 0; i < 100; i++) {
        nb_cell_id_new(seen[i]);
        hex &= strlen(seen[i]) == 8 && strspn(seen[i], "0123456789abcdef") == 8;
        for (int j = 0; j < i; j++)
            distinct &= strcmp(seen[i], seen[j]) != 0;
    }
    ok(hex, "new cell ids are 8 lowercase hex digits, like uuid4().hex[:8]");
    ok(distinct, "100 new cell ids are all different");
    nb_cell_id_new(id);
    ok(nb_cell_id_valid(id) && nb_cell_id_valid("a-Z_9") &&
           !nb_cell_id_valid("") && !nb_cell_id_valid("a b") &&
           !nb_cell_id_valid("caf\xc3\xa9") &&
           nb_cell_id_valid("0123456789012345678901234567890123456789012345678"
                            "901234567890123") &&
           !nb_cell_id_valid("0123456789012345678901234567890123456789012345"
                             "6789012345678901234"),
       "cell id validity follows nbformat: [a-zA-Z0-9-_], 1 to 64 characters");

    const char *v44 =
        "{\"nbformat\": 4, \"nbformat_minor\": 4, \"metadata\": {}, \"cells\": "
        "[{\"cell_type\": \"markdown\", \"metadata\": {}, \"source\": \"a\"},"
        " {\"cell_type\": \"markdown\", \"metadata\": {}, \"source\": \"b\", "
        "\"id\": \"bad id\"},"
        " {\"cell_type\": \"raw\", \"metadata\": {}, \"source\": \"c\"}]}";
    nb_notebook_t *nb = s_read(v44, &err);
    ok(nb != NULL, "an nbformat 4.4 notebook is read");
    if (!nb)
        return;
    const char *a = nb_cell_id(nb_notebook_cell(nb, 0));
    const char *b = nb_cell_id(nb_notebook_cell(nb, 1));
    const char *c = nb_cell_id(nb_notebook_cell(nb, 2));
    ok(nb_cell_id_valid(a) && nb_cell_id_valid(b) && nb_cell_id_valid(c) &&
           strcmp(a, b) && strcmp(b, c) && strcmp(a, c),
       "an upgraded 4.4 notebook gets valid, distinct ids on every cell");
    is_int(json_integer_value(
               json_object_get(nb_notebook_json(nb), "nbformat_minor")),
           5, "an upgraded 4.4 notebook is written as 4.5");
    is_int(nb_notebook_orig_minor(nb), 4,
           "the minor version it was read as is remembered");
    ok(nb_notebook_validate(nb, &err) == 0, "the upgraded notebook validates");
    nb_notebook_destroy(&nb);

    const char *dup =
        "{\"nbformat\": 4, \"nbformat_minor\": 5, \"metadata\": {}, \"cells\": "
        "[{\"id\": \"same\", \"cell_type\": \"raw\", \"metadata\": {}, "
        "\"source\": \"\"},"
        " {\"id\": \"same\", \"cell_type\": \"raw\", \"metadata\": {}, "
        "\"source\": \"\"},"
        " {\"cell_type\": \"raw\", \"metadata\": {}, \"source\": \"\"},"
        " {\"id\": \"keep-me\", \"cell_type\": \"raw\", \"metadata\": {}, "
        "\"source\": \"\"}]}";
    nb = s_read(dup, &err);
    ok(nb && !strcmp(nb_cell_id(nb_notebook_cell(nb, 0)), "same") &&
           strcmp(nb_cell_id(nb_notebook_cell(nb, 1)), "same") &&
           nb_cell_id_valid(nb_cell_id(nb_notebook_cell(nb, 1))) &&
           nb_cell_id_valid(nb_cell_id(nb_notebook_cell(nb, 2))) &&
           !strcmp(nb_cell_id(nb_notebook_cell(nb, 3)), "keep-me"),
       "in a 4.5 notebook a repeated id is replaced, a missing one added, "
       "unique ones kept");

    json_t *cell = nb_cell_new_raw("x");
    json_object_set_new(cell, "id", json_string("keep-me"));
    nb_notebook_append(nb, cell);
    ok(strcmp(nb_cell_id(nb_notebook_cell(nb, 4)), "keep-me") != 0,
       "appending a cell whose id is taken gives it a fresh one");
    ok(nb_notebook_validate(nb, &err) == 0,
       "the repaired notebook validates (%s)", err.text);
    nb_notebook_destroy(&nb);
}

static void
s_test_new_and_write_file(void)
{
    err_t err = {0};
    nb_notebook_t *nb = nb_notebook_new();
    json_t *code = nb_cell_new_code("print(1)\n");
    json_t *md = nb_cell_new_markdown("bad \xff byte");
    char path[256], *text;
    struct stat st;

    is_str(nb_cell_source(md), "bad \xef\xbf\xbd byte",
           "invalid UTF-8 in a new cell's source becomes U+FFFD");
    json_object_set_new(code, "id", json_string("fixed-1"));
    json_object_set_new(md, "id", json_string("fixed-2"));
    nb_notebook_append(nb, code);
    nb_notebook_append(nb, md);
    text = nb_notebook_write_mem(nb, NULL);
    is_str(text,
           "{\n \"cells\": [\n  {\n   \"cell_type\": \"code\",\n"
           "   \"execution_count\": null,\n   \"id\": \"fixed-1\",\n"
           "   \"metadata\": {},\n   \"outputs\": [],\n   \"source\": [\n"
           "    \"print(1)\\n\"\n   ]\n  },\n  {\n   \"cell_type\": "
           "\"markdown\",\n   \"id\": \"fixed-2\",\n   \"metadata\": {},\n"
           "   \"source\": [\n    \"bad \xef\xbf\xbd byte\"\n   ]\n  }\n ],\n"
           " \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n",
           "new cells are shaped as nbformat.v4.new_code_cell and "
           "new_markdown_cell make them");
    free(text);
    ok(nb_notebook_validate(nb, &err) == 0, "a new notebook validates");

    snprintf(path, sizeof path, "%s/out.ipynb", tmpdir);
    ok(nb_notebook_write_file(nb, path, &err) == 0 && stat(path, &st) == 0,
       "a notebook is written to a file");
    chmod(path, 0640);
    nb_notebook_write_file(nb, path, &err);
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640,
       "rewriting a notebook keeps the file's permissions");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", tmpdir);
    ok(system(cmd) == 0, "no temporary file is left next to it");
    nb_notebook_t *back = nb_notebook_read_file(path, &err);
    ok(back && nb_notebook_ncells(back) == 2 &&
           !strcmp(nb_cell_id(nb_notebook_cell(back, 1)), "fixed-2"),
       "the written file reads back");
    nb_notebook_destroy(&back);
    err_clear(&err);
    ok(nb_notebook_write_file(nb, "/nonexistent-dir/x.ipynb", &err) == -1 &&
           err.code == ERR_IO && strstr(err.text, "/nonexistent-dir/x.ipynb"),
       "a write into a missing directory fails with ERR_IO naming the path");
    unlink(path);
    nb_notebook_destroy(&nb);
}

static void
s_test_large(void)
{
    nb_notebook_t *nb = nb_notebook_new(), *back;
    err_t err = {0};
    char src[64];
    size_t len, len2;
    for (int i = 0; i < 10000; i++) {
        snprintf(src, sizeof src, "x%d = %d\nprint(x%d)\n", i, i, i);
        nb_notebook_append(nb, i % 2 ? nb_cell_new_markdown(src)
                                     : nb_cell_new_code(src));
    }
    char *text = nb_notebook_write_mem(nb, &len);
    back = nb_notebook_read_mem(text, len, "big", &err);
    char *again = back ? nb_notebook_write_mem(back, &len2) : NULL;
    ok(back && nb_notebook_ncells(back) == 10000 && len == len2 &&
           memcmp(text, again, len) == 0 &&
           nb_notebook_validate(back, &err) == 0,
       "a 10000-cell notebook round-trips unchanged, with unique ids");
    free(text);
    free(again);
    nb_notebook_destroy(&back);
    nb_notebook_destroy(&nb);
}

static void
s_test_record(void)
{
    err_t err = {0};
    nb_record_t *rec = nb_record_new();
    json_t *info = json_pack("{s:{s:s, s:s}}", "language_info", "name",
                             "python", "version", "3.11.2");
    json_t *outputs = json_array();
    json_t *md;

    nb_record_set_kernel(rec, info, "python3", "Python 3 (ipykernel)");
    json_decref(info);
    md = nb_notebook_metadata(nb_record_notebook(rec));
    is_str(s_string_at(md, "kernelspec/language"), "python",
           "kernelspec.language comes from the kernel's language_info");
    is_str(s_string_at(md, "kernelspec/display_name"), "Python 3 (ipykernel)",
           "kernelspec.display_name is recorded");
    is_str(s_string_at(md, "language_info/version"), "3.11.2",
           "language_info is copied from kernel_info_reply");

    json_t *mcell = nb_record_add_markdown(rec, "question?");
    is_str(nb_cell_type(mcell), "markdown", "a prompt becomes a markdown cell");
    json_t *cell = nb_record_add_code(rec, "print(2)", outputs, 4,
                                      "2024-01-01T00:00:00.000000Z",
                                      "2024-01-01T00:00:01.000000Z");
    ok(json_object_get(cell, "outputs") == outputs,
       "a code cell keeps the very outputs array it was given");
    json_array_append_new(outputs,
                          json_pack("{s:s, s:s, s:s}", "output_type", "stream",
                                    "name", "stdout", "text", "2\n"));
    char *text = nb_notebook_write_mem(nb_record_notebook(rec), NULL);
    ok(strstr(text, "\"text\": [\n      \"2\\n\"\n     ]") != NULL,
       "an output added to that array later is in the saved notebook");
    free(text);
    is_int(json_integer_value(json_object_get(cell, "execution_count")), 4,
           "the execution count is recorded");
    is_str(s_string_at(cell, "metadata/execution/iopub.status.busy"),
           "2024-01-01T00:00:00.000000Z", "busy time is the start time");
    is_str(s_string_at(cell, "metadata/execution/shell.execute_reply"),
           "2024-01-01T00:00:01.000000Z", "reply time is the end time");
    json_t *never = nb_record_add_code(rec, "x", NULL, -1, NULL, NULL);
    ok(json_is_null(json_object_get(never, "execution_count")) &&
           json_array_size(json_object_get(never, "outputs")) == 0 &&
           !json_object_get(json_object_get(never, "metadata"), "execution"),
       "an unexecuted cell records null, no outputs and no timing");
    json_t *not_list = json_object();
    ok(nb_record_add_code(rec, "x", not_list, 1, NULL, NULL) == NULL,
       "outputs that are not a list are refused");
    json_decref(not_list);
    nb_record_set_metadata(rec, "jupyter_agent",
                           json_pack("{s:s}", "model", "replay:x"));
    is_str(s_string_at(md, "jupyter_agent/model"), "replay:x",
           "metadata.jupyter_agent is recorded");
    ok(nb_notebook_validate(nb_record_notebook(rec), &err) == 0,
       "the recorded notebook passes the C-side check (%s)", err.text);
    char path[256];
    snprintf(path, sizeof path, "%s/session.ipynb", tmpdir);
    ok(nb_record_save(rec, path, &err) == 0 && access(path, R_OK) == 0,
       "the recording is saved");
    unlink(path);
    json_decref(outputs);
    nb_record_destroy(&rec);
    ok(rec == NULL, "destroy clears the caller's pointer");
}

int
main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    s_test_errors();
    s_test_normalise_and_roundtrip();
    s_test_ids();
    s_test_new_and_write_file();
    s_test_large();
    s_test_record();
    rmdir(tmpdir);
    return done_testing();
}
