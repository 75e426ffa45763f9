/*
 * Fuzz target: arbitrary bytes as a notebook file.
 *
 * Every input either reads into a notebook or fails with a message. A
 * notebook that was read must write, read back and write again to the very
 * same bytes (the writer's output is a fixed point of read+write), and its
 * cells must all carry ids. Neither path may crash or leak.
 */
#include "notebook-io/nb_notebook.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    err_t err;
    nb_notebook_t *nb, *again;
    char *text, *text2;
    size_t len, len2;

    err_clear(&err);
    nb = nb_notebook_read_mem((const char *)data, size, "fuzz.ipynb", &err);
    if (!nb) {
        if (err.text[0] == '\0' || err.code != ERR_USAGE)
            abort(); /* a failure always says why */
        return 0;
    }
    for (size_t i = 0; i < nb_notebook_ncells(nb); i++)
        if (!json_object_get(nb_notebook_cell(nb, i), "id"))
            abort();
    err_clear(&err);
    (void)nb_notebook_validate(nb, &err);
    text = nb_notebook_write_mem(nb, &len);
    again = nb_notebook_read_mem(text, len, "fuzz-out.ipynb", &err);
    if (!again)
        abort(); /* we wrote something we cannot read */
    text2 = nb_notebook_write_mem(again, &len2);
    if (len != len2 || memcmp(text, text2, len) != 0)
        abort();
    free(text);
    free(text2);
    nb_notebook_destroy(&again);
    nb_notebook_destroy(&nb);
    return 0;
}
