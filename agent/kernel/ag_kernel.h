/*
 * ag_kernel: jupyter-agent as a Jupyter kernel. A frontend (JupyterLab,
 * Notebook, console, jupyter_client) starts `jupyter-agent kernel -f
 * CONNECTION_FILE`; each cell it sends is one of:
 *
 *   %%python            the rest of the cell runs as-is in the session's
 *   <code>              inner (sandboxed) IPython kernel; its outputs,
 *                       input() and errors are forwarded verbatim
 *   %reset              a fresh inner Python session (and a fresh
 *                       conversation for the agent)
 *   anything else       a request to the agent: opts->ask()
 *
 * The inner session starts on first use and dies with this process.
 * language_info says "markdown", so frontends highlight and export cells as
 * the natural-language text they mostly are.
 *
 * Ownership: the kernel owns its server (kb_server), the inner session, the
 * ask state and the history. Single-threaded apart from kb_server's control
 * and heartbeat threads.
 */
#ifndef AGENT_KERNEL_AG_KERNEL_H
#define AGENT_KERNEL_AG_KERNEL_H

#include "agent/session/ag_session.h"
#include "common/err.h"
#include "kernel-bridge/kb_output.h"
#include "notebook-io/nb_record.h"

#include <stdatomic.h>
#include <stdbool.h>

#define AG_KERNEL_LANGUAGE "markdown"
#define AG_KERNEL_DISPLAY_NAME "Agent (sandboxed Python)"
#define AG_KERNEL_MAGIC_PYTHON "%%python"
#define AG_KERNEL_MAGIC_RESET "%reset"
#define AG_KERNEL_MAGIC_EXPORT "%export"
#define AG_KERNEL_MAGIC_MODEL "%model"
#define AG_KERNEL_MAGIC_UPLOAD "%upload"
#define AG_KERNEL_MAGIC_DOWNLOAD "%download"

typedef struct ag_kernel ag_kernel_t;

/* What a plain (non-magic) cell does; see "The interface" below. */
typedef int (*ag_kernel_ask_fn)(ag_kernel_t *k, const char *request,
                                err_t *err);

typedef struct ag_kernel_opts {
    const char *connection_file;    /* path; required */
    ag_kernel_ask_fn ask;           /* required: the tool loop
                                       (ag_loop_kernel_ask), or a test's */
    const ag_session_opts_t *inner; /* borrowed: how to start the inner
                                       session (policy flags, timeout) */
    const char *model;              /* --model, borrowed; NULL = env */
    bool allow_unsigned;            /* serve a connection with no key */
} ag_kernel_opts_t;

/* Bind the channels of the connection file. The inner session is not
 * started yet. NULL + err (ERR_USAGE bad file, ERR_KERNEL cannot bind). */
ag_kernel_t *ag_kernel_new(const ag_kernel_opts_t *opts, err_t *err);
/* Serve until a shutdown_request (or ag_kernel_stop). Returns 0. */
int ag_kernel_run(ag_kernel_t *k);
/* Async-signal-safe: SIGINT interrupts the running cell, SIGTERM stops. */
void ag_kernel_interrupt(ag_kernel_t *k);
void ag_kernel_stop(ag_kernel_t *k);
/* Shuts the inner session down and closes every socket. NULL is fine. */
void ag_kernel_destroy(ag_kernel_t **k);

/* ---- The interface: what a plain (non-magic) cell does -----------------
 *
 * opts->ask, normally ag_loop_kernel_ask (agent/kernel/ag_loop_kernel.h),
 * is called on the shell thread once per plain cell, with the cell's text. It
 * talks to the user only through the ag_kernel_* services below, which publish
 * with the current execute_request as parent:
 *   - assistant text as it streams:          ag_kernel_stream(k, "stdout", t)
 *   - each code cell before it runs:          ag_kernel_show_code(k, code)
 *   - run it (outputs forwarded to the user): ag_kernel_run_python(k, ...)
 *   - the final answer (markdown):            ag_kernel_answer(k, md)
 * and checks ag_kernel_should_stop() between steps (or hands
 * ag_kernel_cancel_flag() to the provider), returning ERR_INTERRUPTED when
 * it stopped. Conversation state that must survive between cells goes in
 * ag_kernel_set_ask_state(); %reset frees it.
 *
 * Return 0 when the request was answered, or -1 with err: the kernel then
 * publishes err as an error output (unless ag_kernel_error was already
 * called) and replies status "error". The kernel keeps serving either
 * way. */

/* ---- Services for opts->ask (shell thread, during a cell) -------------- */

/* The whole session as a notebook (borrowed): every request, the agent's
 * cells and %%python cells, in order. The loop records into it; %export
 * writes it. */
nb_record_t *ag_kernel_record(ag_kernel_t *k);

/* The model spec in force: %model's, else --model (NULL = environment). */
const char *ag_kernel_model(const ag_kernel_t *k);
/* The inner session, started on first use (borrowed; NULL + err when it
 * cannot start). */
ag_session_t *ag_kernel_session(ag_kernel_t *k, err_t *err);
/* Run code in the inner session exactly as a %%python cell would, but
 * without touching the cell's execution count: every output is forwarded
 * to the frontend as it comes (an execute_result becomes display_data, so
 * the cell's only execute_result is the answer), input() asks the
 * frontend, an interrupt stops it. `out` (caller's) receives the outputs
 * for the model. Returns as kb_kernel_execute (0 = it ran, even if it
 * raised; -1 + ERR_TIMEOUT / ERR_KERNEL / ERR_INTERRUPTED). A dead inner
 * kernel is replaced on the next call. */
int ag_kernel_run_python(ag_kernel_t *k, const char *code, kb_output_t *out,
                         err_t *err);
/* A chunk of assistant text as a stream output ("stdout" or "stderr"). */
void ag_kernel_stream(ag_kernel_t *k, const char *name, const char *text);
/* The code the agent is about to run, as markdown (```python fence) in a
 * display_data, with text/plain for consoles. */
void ag_kernel_show_code(ag_kernel_t *k, const char *code);
/* Any markdown as display_data (progress notes, tables). */
void ag_kernel_display_markdown(ag_kernel_t *k, const char *markdown);
/* The final answer: execute_result {text/markdown, text/plain} with the
 * cell's execution count. Call at most once per cell. */
void ag_kernel_answer(ag_kernel_t *k, const char *markdown);
/* An error output; the cell's reply becomes status "error" with these. */
void ag_kernel_error(ag_kernel_t *k, const char *ename, const char *evalue);
/* Did the user interrupt (or shut the kernel down)? Never blocks. */
bool ag_kernel_should_stop(ag_kernel_t *k);
/* Non-zero while an interrupt or shutdown is pending; for
 * ag_provider_set_cancel. Valid while the kernel lives. */
const atomic_int *ag_kernel_cancel_flag(ag_kernel_t *k);
/* Ask the user a question on the frontend's stdin (when the cell allowed
 * it). malloc'd answer, or NULL + err (ERR_USAGE: stdin not allowed,
 * ERR_INTERRUPTED). */
char *ag_kernel_input(ag_kernel_t *k, const char *prompt, bool password,
                      err_t *err);
/* State owned by opts->ask across cells (e.g. the conversation):
 * `free_fn` releases it on %reset, on replacement and at exit. */
void *ag_kernel_ask_state(ag_kernel_t *k);
void ag_kernel_set_ask_state(ag_kernel_t *k, void *state,
                             void (*free_fn)(void *state));

#endif
