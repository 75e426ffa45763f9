/*
 * nb_record: turns a session (prompts, answers, executions) into an
 * nbformat 4.5 notebook as it happens, so it can be saved at any moment
 * (also after an interrupt) and is valid each time.
 *
 * Markdown cells hold the user's prompts and the assistant's text; code
 * cells hold each execution with its outputs and nbclient's timing keys in
 * cell metadata.execution. Notebook metadata gets kernelspec and
 * language_info (as nbclient records them) and whatever the caller sets,
 * e.g. "jupyter_agent".
 */
#ifndef NOTEBOOK_IO_NB_RECORD_H
#define NOTEBOOK_IO_NB_RECORD_H

#include "common/err.h"
#include "notebook-io/nb_notebook.h"

#include <jansson.h>

typedef struct nb_record nb_record_t;

/* A recorder holding an empty 4.5 notebook. Never NULL. */
nb_record_t *nb_record_new(void);
void nb_record_destroy(nb_record_t **p);

/* Record the kernel: metadata.kernelspec = {name, display_name, language}
 * and metadata.language_info = the "language_info" of `kernel_info_reply`
 * (the reply's content; borrowed, copied). `language` comes from
 * language_info.name and is left out when unknown; `display_name` NULL means
 * the kernelspec name. Returns 0, or -1 if `kernelspec_name` is NULL. */
int nb_record_set_kernel(nb_record_t *rec, const json_t *kernel_info_reply,
                         const char *kernelspec_name, const char *display_name);

/* Append a markdown cell with `text`. Returns the cell (borrowed, valid
 * while `rec` lives), never NULL. */
json_t *nb_record_add_markdown(nb_record_t *rec, const char *text);

/* Append a code cell for one execution. `outputs` (borrowed; NULL for none)
 * is an array of nbformat output dicts: the cell keeps a reference to that
 * very array, not a copy, so outputs changed in place later (an
 * update_display_data applied by the output model) show up in the notebook.
 * `execution_count` < 0 records null (never executed). `start_iso` and
 * `end_iso` ("2024-01-31T12:00:00.123456Z"; either may be NULL) fill
 * metadata.execution: "iopub.status.busy" and "iopub.execute_input" from
 * start, "shell.execute_reply" and "iopub.status.idle" from end. Returns
 * the cell (borrowed), or NULL if `outputs` is not an array. */
json_t *nb_record_add_code(nb_record_t *rec, const char *source,
                           json_t *outputs, int execution_count,
                           const char *start_iso, const char *end_iso);

/* Set one of nbclient's execution timing keys on a recorded code cell,
 * e.g. "iopub.status.idle", for callers that have finer timestamps. */
int nb_record_set_timing(json_t *cell, const char *key, const char *iso);

/* Set notebook metadata[key] = value (stolen, also on failure). 0 or -1. */
int nb_record_set_metadata(nb_record_t *rec, const char *key, json_t *value);

/* The notebook being recorded, borrowed (valid while `rec` lives). */
nb_notebook_t *nb_record_notebook(nb_record_t *rec);

/* Write the notebook so far to `path` (atomically). 0, or -1 with ERR_IO. */
int nb_record_save(nb_record_t *rec, const char *path, err_t *err);

#endif
