/*
 * nb_compare: did a re-run reproduce a notebook? Compares the outputs of
 * two runs of the same notebook, cell by cell.
 *
 * Both sides are normalised the way the project's parity tests normalise
 * (tests/interop/conftest.py): consecutive stream outputs of the same name
 * joined; execution counts, output metadata and transient fields ignored;
 * in text, memory addresses (0x + 6 to 16 hex digits) read as 0xADDR, ANSI
 * CSI sequences dropped and "Cell In[N], line" read with any N. Text mime
 * values must then be equal, JSON mime values equal as JSON.
 *
 * PNG images are decoded (libpng) and compared by size and pixels: a pixel
 * differs when any channel (RGBA, 8 bits) differs by more than
 * NB_COMPARE_CHANNEL_SLACK; an image reproduces when it has the same width
 * and height and at most `image_tolerance_pct` percent of its pixels
 * differ. Other images must be byte-identical once base64-decoded.
 */
#ifndef NOTEBOOK_IO_NB_COMPARE_H
#define NOTEBOOK_IO_NB_COMPARE_H

#include "notebook-io/nb_notebook.h"

#include <jansson.h>
#include <stddef.h>

#define NB_COMPARE_CHANNEL_SLACK 2

typedef struct nb_compare_opts {
    double image_tolerance_pct; /* default 0: every pixel within slack */
} nb_compare_opts_t;

typedef struct nb_compare_result {
    size_t compared;   /* code cells that ran in `want` */
    size_t reproduced; /* ... whose outputs `got` reproduced */
    json_t *diffs;     /* owned array of {"cell" (from 1), "id", "diff"} */
} nb_compare_result_t;

/* Compare the code cells of `got` against `want` (same cells, by
 * position). Fills `res`; release it with nb_compare_result_release. */
void nb_compare_notebooks(const nb_notebook_t *want, const nb_notebook_t *got,
                          const nb_compare_opts_t *o, nb_compare_result_t *res);
void nb_compare_result_release(nb_compare_result_t *res);

/* Compare two PNG images given as base64 (as notebooks store them). Returns
 * NULL when they match under `tolerance_pct`, else a new string saying
 * how they differ. */
char *nb_compare_png_b64(const char *a, const char *b, double tolerance_pct);

#endif
