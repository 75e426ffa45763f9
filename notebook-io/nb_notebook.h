/*
 * nb_notebook: an nbformat 4 notebook in memory, read and written the way
 * nbformat itself does it.
 *
 * The model is the notebook's JSON (jansson), normalised on read exactly as
 * nbformat.reads() normalises it:
 *   - multi-line strings stored as lists of lines are joined: cell "source",
 *     stream "text", and text mime values in output "data" and cell
 *     "attachments" (JSON mime types such as application/json stay objects);
 *   - transient keys are dropped: metadata.orig_nbformat,
 *     metadata.orig_nbformat_minor, metadata.signature, cell metadata.trusted;
 *   - every cell has an "id": notebooks of minor 0-4 are upgraded to 4.5
 *     (nbformat_minor 5, missing or invalid ids replaced, as
 *     nbformat.v4.upgrade does); in 4.5 notebooks missing and duplicate ids
 *     are replaced (as nbformat.validate does). New ids are 8 random hex
 *     digits, like nbformat's uuid4().hex[:8].
 * Everything else, including unknown metadata and unknown fields, is kept
 * as it was and written back.
 *
 * The writer's output is byte-identical to what nbformat.write() puts in a
 * file for the same notebook: nbformat.writes(nb) plus a trailing newline
 * (json.dumps indent=1, sorted keys, raw UTF-8, Python float repr, the
 * strings above split into lists of lines). See nb_json.h.
 *
 * What Python's json.loads and nbformat read, we read: integers past 64
 * bits, NaN and Infinity, lone surrogate escapes (see nb_json_loadb; they
 * are written back byte for byte, the surrogates as their escapes, which
 * nbformat itself cannot write), nbformat 3 notebooks (upgraded to 4.5 as
 * nbformat.v4.convert.upgrade does) and cells without a "source" (a
 * warning, as nbformat's validator logs them; written back as they were).
 *
 * Cell numbers in error messages count from 1 ("cell 3" is cells[2]).
 * Errors: ERR_USAGE for a file that is not a readable nbformat 3 or 4
 * notebook, ERR_IO for a failure to write.
 */
#ifndef NOTEBOOK_IO_NB_NOTEBOOK_H
#define NOTEBOOK_IO_NB_NOTEBOOK_H

#include "common/err.h"

#include <jansson.h>
#include <stddef.h>

typedef struct nb_notebook nb_notebook_t;

/* A cell id from nb_cell_id_new: 8 hex digits and a NUL. */
enum { NB_CELL_ID_SIZE = 9 };
/* Notebooks bigger than this are refused by nb_notebook_read_file
 * (`run --max-notebook-size` raises it). */
#define NB_NOTEBOOK_DEFAULT_MAX_BYTES ((size_t)256 << 20)
/* Notebooks with more cells than this are refused by every reader (`run
 * --max-cells` raises it): an empty cell is ~80 bytes of JSON but ~1.5 KiB
 * in memory, so the byte cap alone lets a small file cost 20 times its
 * size. The cells are counted before the tree is built. */
#define NB_NOTEBOOK_DEFAULT_MAX_CELLS ((size_t)20000)

/* An empty nbformat 4.5 notebook: {"cells": [], "metadata": {},
 * "nbformat": 4, "nbformat_minor": 5}. Never NULL. */
nb_notebook_t *nb_notebook_new(void);

/* Read and normalise a notebook (see above). `origin` names it in error
 * messages (a path, or "<stdin>"); `data` need not be NUL-terminated. A
 * leading UTF-8 byte order mark is skipped. Returns NULL and fills `err`
 * (ERR_USAGE) on invalid JSON (with line and column), a major version other
 * than 4, or a missing required field (naming the cell). */
nb_notebook_t *nb_notebook_read_mem(const char *data, size_t len,
                                    const char *origin, err_t *err);
nb_notebook_t *nb_notebook_read_file(const char *path, err_t *err);
/* The same with a cap: `path` must be a regular file (a FIFO, socket or
 * device is refused without blocking: opened O_NONBLOCK) of at most
 * `max_bytes`, checked before and while reading; ERR_USAGE otherwise. */
nb_notebook_t *nb_notebook_read_path(const char *path, size_t max_bytes,
                                     err_t *err);
/* nb_notebook_read_path with a cap on cells too (0: the default), refused
 * (ERR_USAGE) before the notebook is parsed into memory. */
nb_notebook_t *nb_notebook_read_capped(const char *path, size_t max_bytes,
                                       size_t max_cells, err_t *err);

void nb_notebook_destroy(nb_notebook_t **p);

/* What the last read accepted although nbformat's validator objects (a
 * cell without "source"), or upgraded (nbformat 3), one line each ending in
 * "\n"; NULL when nothing. Borrowed. Callers show it as warnings. */
const char *nb_notebook_warnings(const nb_notebook_t *nb);

/* The whole document, its metadata object and its cells array. Borrowed:
 * valid while `nb` lives. Callers may edit them in place (the runner
 * replaces outputs, the recorder adds metadata). */
json_t *nb_notebook_json(const nb_notebook_t *nb);
json_t *nb_notebook_metadata(const nb_notebook_t *nb);
json_t *nb_notebook_cells(const nb_notebook_t *nb);
size_t nb_notebook_ncells(const nb_notebook_t *nb);
/* Cell `i` (from 0), borrowed, or NULL when out of range. */
json_t *nb_notebook_cell(const nb_notebook_t *nb, size_t i);
/* The nbformat_minor the notebook had when read (5 for nb_notebook_new);
 * less than 5 means it was upgraded and given cell ids. */
int nb_notebook_orig_minor(const nb_notebook_t *nb);

/* Append `cell` (stolen, also on failure). A cell without an id, or whose
 * id is already used by a cell read or appended earlier, gets a fresh one.
 * Returns 0, or -1 if `cell` is not a JSON object. */
int nb_notebook_append(nb_notebook_t *nb, json_t *cell);

/* Set metadata[key] = value (stolen, also on failure). 0 or -1. */
int nb_notebook_set_metadata(nb_notebook_t *nb, const char *key, json_t *value);

/* The notebook as nbformat writes it to a file (trailing newline
 * included). Caller frees; `len` (optional) gets the length. Never NULL. */
char *nb_notebook_write_mem(const nb_notebook_t *nb, size_t *len);

/* Write atomically: a temporary file in the same directory, fsync, rename
 * over `path` (a symlink there is replaced, never followed). An existing
 * regular file's rwx bits are kept (never setuid, setgid or sticky); a new
 * file, or one replacing a link, gets 0666 minus the umask. 0, or -1 with
 * ERR_IO. */
int nb_notebook_write_file(const nb_notebook_t *nb, const char *path,
                           err_t *err);

/* A basic nbformat 4.5 schema check (the authoritative one is
 * nbformat.validate in the interop tests): required keys and their types,
 * known cell and output types, cell id pattern and uniqueness. 0, or -1
 * with ERR_USAGE naming the first problem found. */
int nb_notebook_validate(const nb_notebook_t *nb, err_t *err);

/* New cells, shaped as nbformat.v4.new_*_cell makes them, with a fresh id.
 * New references. `source` may be NULL (""); invalid UTF-8 in it is
 * replaced by U+FFFD. */
json_t *nb_cell_new_code(const char *source);
json_t *nb_cell_new_markdown(const char *source);
json_t *nb_cell_new_raw(const char *source);

/* A file next to notebook `path`, named after it: `path` without a final
 * ".ipynb", then `suffix` ("x.ipynb", "_files" -> "x_files"). New string. */
char *nb_path_sibling(const char *path, const char *suffix);

/* Fill `out` with a fresh random cell id: 8 lowercase hex digits. */
void nb_cell_id_new(char out[NB_CELL_ID_SIZE]);
/* Does `id` match nbformat's ^[a-zA-Z0-9-_]+$ with 1 to 64 characters? */
int nb_cell_id_valid(const char *id);

/* Fields of a cell, borrowed from it; NULL when absent or not a string
 * (after a read, "source" is always a string). */
const char *nb_cell_type(const json_t *cell);
const char *nb_cell_source(const json_t *cell);
const char *nb_cell_id(const json_t *cell);

#endif
