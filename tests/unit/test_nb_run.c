/*
 * test_nb_run: the parts of the notebook runner that need no kernel:
 * papermill's typing and quoting of -p values, nbclient's "blank cell"
 * rule, and where the injected-parameters cell goes. (Execution itself is
 * tested against nbclient in tests/interop/test_run_parity.py.)
 */
#include "../tap.h"

#include "common/err.h"
#include "notebook-io/nb_notebook.h"
#include "notebook-io/nb_run.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Expected values computed with CPython 3.11 and papermill's rules:
 * PythonTranslator.translate(_resolve_type(value)). */
static const struct {
    const char *value, *literal;
} s_literals[] = {
    {"True", "True"},
    {"true", "\"true\""},
    {"None", "None"},
    {"0", "0"},
    {"-0", "0"},
    {"+5", "5"},
    {"007", "7"},
    {"1_000", "1000"},
    {"1__0", "\"1__0\""},
    {"_1", "\"_1\""},
    {"1_", "\"1_\""},
    {" 12\t", "12"},
    {"12345678901234567890123", "12345678901234567890123"},
    {"1.", "1.0"},
    {".5", "0.5"},
    {"1e5", "100000.0"},
    {"1E-5", "1e-05"},
    {"1e", "\"1e\""},
    {"1_0.2_5", "10.25"},
    {"inf", "float('inf')"},
    {"-Infinity", "float('-inf')"},
    {"nAn", "float('nan')"},
    {"+nan", "float('nan')"},
    {"0x10", "\"0x10\""},
    {"1.5e400", "float('inf')"},
    {"-1e400", "float('-inf')"},
    {"", "\"\""},
    {"a\\b", "\"a\\\\b\""},
    {"say \"hi\"", "\"say \\\"hi\\\"\""},
    {"it's", "\"it's\""},
    {"\x01\x7f\xc2\x80\xc3\xbf", "\"\\x01\\x7f\\x80\\xff\""},
    {"tab\there\nnext\r", "\"tab\\there\\nnext\\r\""},
    {"\xc3\xa9", "\"\\xe9\""},
    {"\xe2\x82\xac", "\"\\u20ac\""},
    {"\xf0\x9f\x98\x80", "\"\\U0001f600\""},
    {"\xe3\x80\x80 7 \xe3\x80\x80", "7"},
    {"\xe2\x80\x8b", "\"\\u200b\""},
    {"\xff\xfe", "\"\\udcff\\udcfe\""}, /* argv bytes, surrogateescape */
};

static void
test_literals(void)
{
    for (size_t i = 0; i < sizeof s_literals / sizeof *s_literals; i++) {
        json_t *typed = NULL;
        char *lit = nb_param_literal(s_literals[i].value, &typed);
        is_str(lit, s_literals[i].literal,
               "-p value #%zu is written as papermill writes it", i);
        ok(typed != NULL, "-p value #%zu has a JSON form for metadata", i);
        free(lit);
        json_decref(typed);
    }
    json_t *t = NULL;
    free(nb_param_literal("42", &t));
    ok(json_is_integer(t) && json_integer_value(t) == 42,
       "an int parameter is recorded as a JSON integer");
    json_decref(t);
    free(nb_param_literal("2.5", &t));
    ok(json_is_real(t) && json_real_value(t) == 2.5,
       "a float parameter is recorded as a JSON number");
    json_decref(t);
    free(nb_param_literal("False", &t));
    ok(json_is_false(t), "False is recorded as JSON false");
    json_decref(t);
}

static void
test_names(void)
{
    ok(nb_param_name_valid("alpha") && nb_param_name_valid("_x9"),
       "identifiers are accepted as parameter names");
    ok(!nb_param_name_valid("9x") && !nb_param_name_valid("a-b") &&
           !nb_param_name_valid("") && !nb_param_name_valid("x=1;y"),
       "non-identifiers are refused as parameter names");
    ok(!nb_param_name_valid("import") && !nb_param_name_valid("None"),
       "Python keywords are refused as parameter names");
}

static void
test_blank(void)
{
    ok(nb_run_source_blank("") && nb_run_source_blank(" \n\t\r\f\v"),
       "a cell of ASCII whitespace is blank (nbclient skips it)");
    ok(nb_run_source_blank("\xe3\x80\x80\xc2\xa0\xe2\x80\xa8"),
       "Unicode whitespace counts as blank, as str.strip() says");
    ok(!nb_run_source_blank("\xe2\x80\x8b"),
       "a zero-width space is not blank (str.strip() keeps it)");
    ok(!nb_run_source_blank("  # comment\n"),
       "a cell holding only a comment is executed");
}

/* A notebook of cells, each "c" (code), "p" (tagged parameters), "i"
 * (tagged injected-parameters) or "m" (markdown). */
static nb_notebook_t *
s_notebook(const char *shape)
{
    nb_notebook_t *nb = nb_notebook_new();
    for (const char *s = shape; *s; s++) {
        json_t *cell = *s == 'm' ? nb_cell_new_markdown("text")
                                 : nb_cell_new_code("x = 1");
        const char *tag = *s == 'p'   ? "parameters"
                          : *s == 'i' ? "injected-parameters"
                                      : NULL;
        if (tag)
            json_object_set_new(json_object_get(cell, "metadata"), "tags",
                                json_pack("[s]", tag));
        nb_notebook_append(nb, cell);
    }
    return nb;
}

static const char *
s_src(nb_notebook_t *nb, long i)
{
    return nb_cell_source(nb_notebook_cell(nb, (size_t)i));
}

static void
test_injection(void)
{
    const char *names[] = {"a", "b", "a"};
    const char *values[] = {"1", "x y", "2"};
    err_t err = {0};
    json_t *params = NULL;

    nb_notebook_t *nb = s_notebook("mpc");
    long at = nb_run_inject_parameters(nb, names, values, 3, &params, &err);
    is_int(at, 2, "the injected cell goes right after the parameters cell");
    is_int((long)nb_notebook_ncells(nb), 4, "one cell is added");
    is_str(s_src(nb, at), "# Parameters\na = 2\nb = \"x y\"\n",
           "a repeated name keeps its first place and its last value");
    ok(json_integer_value(json_object_get(params, "a")) == 2 &&
           json_object_size(params) == 2,
       "the parameters are reported once each, with their final values");
    ok(nb_notebook_validate(nb, &err) == 0,
       "the notebook with the injected cell is valid");
    json_decref(params);

    const char *n1[] = {"a"}, *v1[] = {"3"};
    at = nb_run_inject_parameters(nb, n1, v1, 1, NULL, &err);
    is_int(at, 2, "a second injection replaces the injected cell in place");
    is_int((long)nb_notebook_ncells(nb), 4, "and adds no cell");
    is_str(s_src(nb, at), "# Parameters\na = 3\n",
           "the replaced cell holds only the new parameters");
    nb_notebook_destroy(&nb);

    nb = s_notebook("cic");
    at = nb_run_inject_parameters(nb, n1, v1, 1, NULL, &err);
    is_int(at, 1,
           "an existing injected cell is replaced even without a "
           "parameters cell");
    nb_notebook_destroy(&nb);

    nb = s_notebook("mc");
    at = nb_run_inject_parameters(nb, n1, v1, 1, NULL, &err);
    is_int(at, 0, "without a parameters cell the injected cell goes first");
    ok(strcmp(nb_cell_id(nb_notebook_cell(nb, 0)),
              nb_cell_id(nb_notebook_cell(nb, 1))) != 0 &&
           strcmp(nb_cell_id(nb_notebook_cell(nb, 0)),
                  nb_cell_id(nb_notebook_cell(nb, 2))) != 0,
       "the injected cell gets an id of its own");

    const char *bad[] = {"1a"};
    err_clear(&err);
    at = nb_run_inject_parameters(nb, bad, v1, 1, NULL, &err);
    ok(at == -1 && err.code == ERR_USAGE && strstr(err.text, "1a"),
       "an invalid name is refused, naming it");
    is_int((long)nb_notebook_ncells(nb), 3,
           "a refused injection leaves the notebook alone");
    nb_notebook_destroy(&nb);
}

int
main(void)
{
    test_literals();
    test_names();
    test_blank();
    test_injection();
    return done_testing();
}
