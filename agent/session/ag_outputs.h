/*
 * ag_outputs: outputs as data (docs/outputs.md). A session's Python kernel
 * gets two display formatters (ag_outputs.py) that add chart data to each
 * matplotlib figure and table data to each pandas DataFrame or Series,
 * next to their picture and text.
 */
#ifndef AGENT_SESSION_AG_OUTPUTS_H
#define AGENT_SESSION_AG_OUTPUTS_H

#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"

#define AG_OUTPUTS_CHART_MIME "application/vnd.jupyter-agent.chart+json"
#define AG_OUTPUTS_TABLE_MIME "application/vnd.jupyter-agent.table+json"

/* Install the formatters in `k` when it is a Python kernel: one silent
 * execution (no history, no outputs, no execution count). Idempotent; a
 * kernel of another language is left alone (0). Fails with err set when
 * the execution fails or raised. */
int ag_outputs_install(kb_kernel_t *k, int timeout_ms, err_t *err);
#define AG_OUTPUTS_TIMEOUT_MS 30000

/* The cell ag_outputs_install runs: one line that decodes and runs
 * ag_outputs.py (static, built on first use). */
const char *ag_outputs_cell(void);

/* The install's time limit for a session whose cells have `cell_ms`
 * (0: none): never longer than a cell may take, so a kernel or server
 * that does not answer costs no more than the user's own --timeout. */
int ag_outputs_timeout(int cell_ms);

/* ag_outputs_install as a kb_kernel_opts_t.on_restart hook: a restarted
 * kernel gets the formatters again. arg is the install's time limit in
 * ms as (void *)(intptr_t)ms, from ag_outputs_timeout_arg; NULL means
 * AG_OUTPUTS_TIMEOUT_MS. */
int ag_outputs_on_restart(kb_kernel_t *k, void *arg, err_t *err);

#endif
