/*
 * ag_loop_kernel: the tool loop behind the agent kernel's plain cells.
 *
 * `jupyter-agent kernel` passes ag_loop_kernel_ask as ag_kernel_opts_t.ask,
 * so ag_kernel.c never names the loop (the dependency points one way:
 * this file uses ag_kernel's services). The first plain cell builds an
 * ag_loop_t over the kernel's inner session and keeps it as the kernel's ask
 * state, so the conversation carries on from cell to cell until %reset. Code
 * runs through ag_kernel_run_python (its outputs reach the frontend as they
 * come); the model's notes between steps and each cell's code are shown as
 * markdown; the final answer is the cell's execute_result (text/markdown).
 * Ctrl-C in the frontend (interrupt) reaches the provider and the running cell
 * through the kernel's cancel flag.
 */
#ifndef AGENT_KERNEL_AG_LOOP_KERNEL_H
#define AGENT_KERNEL_AG_LOOP_KERNEL_H

#include "agent/kernel/ag_kernel.h"
#include "common/err.h"

/* Answer one plain cell. 0 when answered (or stopped at the step limit,
 * said in the output); -1 + err otherwise: ERR_PROVIDER (not configured,
 * or the model failed), ERR_INTERRUPTED, ERR_SANDBOX / ERR_KERNEL (the
 * session could not start or be restarted). */
int ag_loop_kernel_ask(ag_kernel_t *k, const char *request, err_t *err);

#endif
