/*
 * The cap on cells: a notebook with more cells than the cap is refused
 * before it is parsed, counting only the top-level "cells" array's
 * elements (not brackets or the word "cells" inside strings, nor nested
 * arrays), and a notebook at the cap is read.
 */
#include "../tap.h"

#include "common/buf.h"
#include "common/err.h"
#include "notebook-io/nb_notebook.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_path[] = "/tmp/ja-maxcells-XXXXXX";

/* A notebook of `n` cells, each `cell` (JSON text), before "metadata" when
 * `cells_first`; written to s_path. */
static void
s_write(size_t n, const char *cell, const char *extra_top)
{
    buf_t b;
    buf_init(&b, 0);
    buf_printf(&b, "{%s\"cells\": [", extra_top ? extra_top : "");
    for (size_t i = 0; i < n; i++)
        buf_printf(&b, "%s%s", i ? ", " : "", cell);
    buf_puts(&b,
             "], \"metadata\": {}, \"nbformat\": 4, \"nbformat_minor\": 4}");
    FILE *f = fopen(s_path, "w");
    fwrite(b.data, 1, b.len, f);
    fclose(f);
    buf_release(&b);
}

static const char s_cell[] = "{\"cell_type\": \"code\", \"execution_count\": "
                             "null, \"metadata\": {}, \"outputs\": [], "
                             "\"source\": \"\"}";
/* Strings that look like structure: brackets, commas, a "cells" key and
 * escaped quotes inside the source, nested arrays in the outputs. */
static const char s_tricky[] =
    "{\"cell_type\": \"code\", \"execution_count\": null, \"metadata\": "
    "{\"cells\": [1, 2, 3], \"x\": \"],[,\\\"cells\\\": [\"}, \"outputs\": "
    "[{\"output_type\": \"stream\", \"name\": \"stdout\", \"text\": [\"a,\", "
    "\"]\\\\\"]}], \"source\": [\"print(']]],,,')\\n\", \"\\\"\"]}";

static bool
s_read(size_t cap, err_t *err)
{
    nb_notebook_t *nb = nb_notebook_read_capped(s_path, 1 << 30, cap, err);
    bool got = nb != NULL;
    nb_notebook_destroy(&nb);
    return got;
}

int
main(void)
{
    int fd = mkstemp(s_path);
    close(fd);
    err_t err = {0};

    s_write(10, s_cell, NULL);
    ok(s_read(10, &err), "a notebook of exactly --max-cells cells is read");
    ok(!s_read(9, &err) && err.code == ERR_USAGE &&
           strstr(err.text, "more than 9 cells") &&
           strstr(err.text, "--max-cells"),
       "one cell over the cap is refused, naming the cap and --max-cells");

    s_write(10, s_tricky, "\"x\": \"\\\"cells\\\": [[[\", ");
    ok(s_read(10, &err),
       "brackets, commas and \"cells\" inside strings and metadata do not "
       "count");
    ok(!s_read(9, &err) && strstr(err.text, "more than 9 cells"),
       "... and the real cells still do");

    s_write(0, s_cell, NULL);
    ok(s_read(1, &err), "an empty notebook is read under any cap");

    s_write(NB_NOTEBOOK_DEFAULT_MAX_CELLS + 1, s_cell, NULL);
    ok(!s_read(0, &err) && strstr(err.text, "more than 20000 cells"),
       "the default cap (0) is NB_NOTEBOOK_DEFAULT_MAX_CELLS");
    nb_notebook_t *nb = nb_notebook_read_file(s_path, &err);
    ok(!nb, "nb_notebook_read_file keeps the default cap");
    nb_notebook_destroy(&nb);

    unlink(s_path);
    return done_testing();
}
