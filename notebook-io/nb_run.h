/*
 * nb_run: execute a notebook's code cells in a kernel, storing what
 * nbclient 0.7 stores, and papermill's parameter injection.
 *
 * The rules are nbclient's (NotebookClient.async_execute_cell):
 *   - only code cells run; a cell whose source is empty after Python's
 *     str.strip(), or tagged "skip-execution", is left untouched;
 *   - before a cell runs its outputs and metadata.execution are cleared;
 *     afterwards execution_count is the number of code cells executed so
 *     far (1, 2, ...), outputs are the kernel's (kb_output: one display_id
 *     registry for the whole run, so update_display_data reaches earlier
 *     cells in place), and metadata.execution holds nbclient's timing keys
 *     "iopub.status.busy", "iopub.execute_input", "iopub.status.idle" (the
 *     kernel's message dates) and "shell.execute_reply" (when the reply
 *     was taken, host clock);
 *   - execute_request: store_history true, allow_stdin false (input()
 *     raises, as under nbclient), stop_on_error unless the cell may raise;
 *   - a cell may raise when allow_errors is set or it is tagged
 *     "raises-exception"; otherwise an error stops the run;
 *   - notebook metadata.language_info becomes the kernel's; kernelspec is
 *     kept as it is, and added (from the kernel's kernelspec) only when the
 *     notebook has none, so the result re-runs with the same kernel.
 * Where nbclient would raise instead (timeout, dead kernel) the cell gets an
 * error output saying what happened ("CellTimeoutError", "DeadKernelError",
 * "KeyboardInterrupt" for a stop asked by the caller) and the run stops.
 * When the run stops early, the code cells after the one where it stopped
 * are left as never executed (outputs [], execution_count null, no
 * metadata.execution), as papermill leaves them, so the notebook never
 * mixes fresh outputs with stale ones from an earlier run.
 *
 * Library code: no printing; progress goes to the on_cell callback.
 */
#ifndef NOTEBOOK_IO_NB_RUN_H
#define NOTEBOOK_IO_NB_RUN_H

#include "common/err.h"
#include "kernel-bridge/kb_client.h"
#include "kernel-bridge/kb_kernel.h"
#include "notebook-io/nb_notebook.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One code cell starting or finishing, for progress reports. */
typedef struct nb_run_event {
    size_t cell;         /* index in the notebook, from 0 */
    size_t ordinal;      /* this is the ordinal-th cell to execute (from 1) */
    size_t total;        /* cells that will be executed in all */
    bool done;           /* false: about to start; true: finished */
    const char *status;  /* when done: "ok", "error" (raised), "timeout",
                            "died", "interrupted"; NULL before */
    int64_t duration_ms; /* when done: wall time of the cell */
} nb_run_event_t;

typedef struct nb_run_opts {
    int timeout_ms;          /* per cell; <= 0 means no limit */
    bool allow_errors;       /* keep going after a cell raises */
    const char *skip_tag;    /* NULL = "skip-execution" */
    size_t max_output_bytes; /* stored output per cell; 0 = no cap */
    bool merge_streams;      /* coalesce consecutive same-name stream outputs
                                (nbclient 0.7 keeps them apart: false) */
    /* Replay what a recorded session did around its cells (archive rerun):
     * a markdown note with metadata.jupyter_agent.action "reset" restarts
     * the kernel there; a code cell's metadata.jupyter_agent.timeout_s (a
     * call's own limit, MCP's "timeout") is its limit when lower than
     * timeout_ms; and a tool call's cell (metadata.jupyter_agent.tool:
     * ask, mcp) that times out ends only itself, as it did in the session,
     * with the session's note ("[jupyter-agent] timed out after ..." on
     * stderr) instead of a CellTimeoutError. */
    bool replay_session;
    /* Called before and after each executed cell (may be NULL). */
    void (*on_cell)(const nb_run_event_t *ev, void *arg);
    void *arg; /* for on_cell */
    /* Passed to every execution: on_iopub sees each message after it was
     * stored, should_stop asks to stop (the cell is interrupted and the run
     * ends with ERR_INTERRUPTED). on_input is ignored: stdin is off. */
    kb_exec_hooks_t hooks;
} nb_run_opts_t;

typedef struct nb_run_result {
    int code;            /* ERR_OK, or why the run stopped: ERR_USER_CODE,
                            ERR_TIMEOUT, ERR_KERNEL, ERR_INTERRUPTED */
    size_t total;        /* code cells to execute (not empty, not skipped) */
    size_t executed;     /* code cells executed (started) */
    size_t errors;       /* executed cells that raised (allowed or not) */
    long stopped_at;     /* index of the cell where the run stopped, or -1 */
    int64_t duration_ms; /* wall time of the whole run */
    char started[40];    /* ISO 8601 UTC, as Jupyter writes dates */
    char finished[40];   /* idem */
} nb_run_result_t;

/* Defaults: no timeout, stop on errors, "skip-execution", 64 MiB. */
void nb_run_opts_init(nb_run_opts_t *o);

/* Execute the code cells of `nb` in order in kernel `k` (both borrowed;
 * the kernel should be fresh). `res` (required) is always filled. Returns
 * 0 when every cell ran (errors allowed by option or tag included), or -1
 * with `err` set (same code as res->code) saying which cell stopped the
 * run and why, e.g. "cell 4 raised ZeroDivisionError: division by zero".
 * Either way `nb` holds everything recorded and can be written. */
int nb_run_notebook(nb_notebook_t *nb, kb_kernel_t *k, const nb_run_opts_t *o,
                    nb_run_result_t *res, err_t *err);

/* The result as JSON for notebook metadata (new reference):
 * {"started", "finished", "duration_ms", "status" ("ok", "error",
 * "timeout", "died", "interrupted"), "cells_executed", "cells_total",
 * "errors", "stopped_at_cell" (from 1, or null)}. */
json_t *nb_run_result_json(const nb_run_result_t *res);

/* Does `source` hold only whitespace (Python's str.isspace set)? */
bool nb_run_source_blank(const char *source);

/* --- parameters (papermill's -p) --------------------------------------- */

/* The Python literal papermill writes for a command-line value, typed as
 * papermill's _resolve_type does: "True", "False", "None" as such; else an
 * int if int(value) would parse (optional sign, digits, single underscores
 * between digits, surrounding whitespace: written normalised, "007" -> 7);
 * else a float if float(value) would parse (written as repr(float), with
 * float('nan'), float('inf'), float('-inf') for the non-finite); else a
 * str: "..." with the value escaped like Python's unicode_escape codec
 * (backslash, \t \n \r, other control and non-ASCII characters as \xNN,
 * \uNNNN, \UNNNNNNNN) and '"' as \" -- so any text round-trips exactly.
 * Bytes that are not UTF-8 become \udcNN, as Python's surrogateescape
 * reads them from argv. New string, caller frees. `typed` (optional) gets
 * the value as JSON for metadata (new reference; big ints and non-finite
 * floats as strings). */
char *nb_param_literal(const char *value, json_t **typed);

/* Is `name` usable as a parameter: an ASCII Python identifier that is not
 * a keyword? */
bool nb_param_name_valid(const char *name);

/* papermill's parameterize_notebook: a new code cell with source
 * "# Parameters\nNAME = LITERAL\n..." (one line per distinct name, in
 * first-seen order, the last value of a repeated name winning), metadata
 * {"tags": ["injected-parameters"]}, and a fresh id. It replaces the first
 * cell tagged "injected-parameters" if there is one, else goes right after
 * the first cell tagged "parameters", else at the top. `names` and
 * `values` hold `n` strings each. Returns the new cell's index, or -1 with
 * ERR_USAGE for an invalid name. `params_out` (optional) gets {name: typed
 * value} for metadata (new reference). */
long nb_run_inject_parameters(nb_notebook_t *nb, const char *const *names,
                              const char *const *values, size_t n,
                              json_t **params_out, err_t *err);

#endif
