/*
 * nb_notebook_impl: private to notebook-io/nb_notebook.c and
 * nb_notebook_v3.c. The reader (nb_notebook.c) checks and normalises a
 * version 4 document; a version 3 one is first upgraded in place by
 * nb_notebook_v3.c, which calls nothing of the reader's but these helpers.
 */
#ifndef NOTEBOOK_IO_NB_NOTEBOOK_IMPL_H
#define NOTEBOOK_IO_NB_NOTEBOOK_IMPL_H

#include "common/err.h"
#include "notebook-io/nb_json.h"

#include <jansson.h>
#include <stdbool.h>

/* A JSON string as Python reads it: not a raw literal (NaN, -Infinity, a
 * big integer: see nb_json_loadb), which Python reads as a number. */
static inline bool
nb_is_text(const json_t *v)
{
    return json_is_string(v) && !nb_json_raw(v);
}

/* err_set(err, ERR_USAGE, "ORIGIN: what"); returns -1. */
int nb_notebook_bad(err_t *err, const char *origin, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* nbformat.v4.convert.upgrade from version 3, in place: worksheets
 * flattened into cells, every cell upgraded; the caller makes it 4.5 with
 * fresh ids. -1 with `err` (ERR_USAGE, naming `origin`) on a malformed
 * document. */
int nb_notebook_upgrade_v3(json_t *root, const char *origin, err_t *err);

#endif
