/*
 * ag_loop: the LLM tool loop. One loop is one conversation with a model
 * about one code session; ag_loop_ask may be called repeatedly (the agent
 * kernel calls it once per cell and the conversation carries on).
 *
 *   ag_loop_opts_t o = {.provider = &provider, .session = session};
 *   ag_loop_t *loop = ag_loop_new(&o, &err);      // provider now owned
 *   ag_loop_stats_t st;
 *   int rc = ag_loop_ask(loop, "What drives the Q3 variance?", &ui, &st,
 *                        &err);
 *   ag_loop_save(loop, "session.ipynb", &err);     // also after a failure
 *   ag_loop_destroy(&loop);
 *
 * One ask: the user's text joins the conversation; then, up to max_steps
 * times: one model turn (ag_provider_turn, its text streamed to the UI),
 * and when it asked for tools, each call run in order (ag_tools_call) and
 * its result appended. The ask ends when a turn asks for no tool (the
 * answer), at the step limit, on Ctrl-C (the cancel flag), on a provider
 * failure, or when the kernel died and no fresh one could be started.
 * Whatever happened, the conversation stays well-formed (every tool call
 * has a result) so a later ask can continue it.
 *
 * The system prompt describes the environment as it is, read at the first
 * ask: the Python and library versions (a silent snippet run in the
 * kernel), the files in /mnt/data with sizes, no network, where outputs go
 * (/mnt/data/out/, created), the time limit per execution. For a kernel on
 * a gateway, the prompt and the tool descriptions name its private
 * directory there (kb_kernel_workdir) instead of /mnt/data.
 *
 * Everything is recorded in an nb_record_t: the user's text and the
 * assistant's text as markdown cells, every tool call as a code cell with
 * its full outputs and execution count, and metadata.jupyter_agent =
 * {provider, model, usage, timings, steps, cells, status, sandbox}. No API
 * key ever reaches the recording (providers keep keys in one header).
 *
 * Ownership: the loop owns the provider (given by ag_provider_t **), the
 * conversation, the tools table and the recorder. The session is borrowed
 * and must outlive the loop. Single-threaded; only the cancel flag may be
 * touched from a signal handler or another thread.
 */
#ifndef AGENT_LOOP_AG_LOOP_H
#define AGENT_LOOP_AG_LOOP_H

#include "agent/llm/ag_conv.h"
#include "agent/llm/ag_provider.h"
#include "agent/loop/ag_tools.h"
#include "agent/session/ag_session.h"
#include "common/err.h"
#include "notebook-io/nb_record.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct ag_loop ag_loop_t;

#define AG_LOOP_MAX_STEPS 20

/* How the loop talks to its user; every member may be NULL. Strings and
 * JSON are borrowed for the duration of the call. */
typedef struct ag_loop_ui {
    /* Assistant text as it streams in. */
    void (*on_text)(const char *text, size_t len, void *arg);
    /* A model turn ended: its whole text and how many tools it called. */
    void (*on_turn)(const char *text, size_t ncalls, void *arg);
    /* A tool is about to run: for python the code, else the arguments
     * (JSON text). */
    void (*on_tool_start)(const char *name, const char *code, void *arg);
    /* One output of the running cell as it arrives (an nbformat output
     * dict). Only called by the loop's own executor: an executor given in
     * ag_loop_opts_t.env shows outputs itself. */
    void (*on_output)(json_t *output, void *arg);
    /* About every 100 ms while a cell runs: milliseconds since it started
     * (the loop's own executor only). */
    void (*on_wait)(int64_t elapsed_ms, void *arg);
    /* A tool finished: its result (text for the model, images, cell). */
    void (*on_tool_end)(const char *name, const ag_tool_result_t *res,
                        void *arg);
    /* Something the user should know: kernel restarted, step limit,
     * interrupted. One line, no newline. */
    void (*on_notice)(const char *text, void *arg);
    void *arg;
} ag_loop_ui_t;

typedef struct ag_loop_opts {
    ag_provider_t **provider; /* required; stolen (*provider set to NULL),
                                 also when ag_loop_new fails */
    ag_session_t *session;    /* borrowed; the kernel and workspace. Required
                                 unless env.run_python is set */
    ag_tool_env_t env;        /* run_python NULL = the loop's own executor
                                 over `session` (kb_kernel_execute with the
                                 UI's callbacks; kb_kernel_restart after a
                                 death); set it to run code elsewhere (the
                                 agent kernel forwards outputs itself). The
                                 limits fields apply either way */
    int timeout_ms;           /* per execution (own executor, and told to the
                                 model); 0 = none */
    int max_steps;            /* model turns per ask; 0 = AG_LOOP_MAX_STEPS */
    const char *autosave;     /* save the notebook here (atomically) after
                                 every tool call and at the end;
                                 NULL = only on ag_loop_save */
    const atomic_int *cancel; /* borrowed; NULL = the loop's own flag, set by
                                 ag_loop_cancel */
    const char *extra_system; /* appended to the system prompt, or NULL */
    nb_record_t *record;      /* borrowed: record the session into this one
                                 (the agent kernel's whole session, its
                                 %%python cells included); NULL = the loop
                                 owns its own */
} ag_loop_opts_t;

/* How one ask went. */
typedef struct ag_loop_stats {
    int steps;          /* model turns in this ask */
    int tool_calls;     /* tool calls answered (invalid ones included) */
    int cells;          /* code cells recorded */
    bool answered;      /* the model gave its answer (a turn with no tools) */
    bool hit_max_steps; /* stopped at the step limit without an answer */
    bool restarted;     /* the kernel died and a fresh one was started */
    ag_usage_t usage;   /* tokens of this ask */
    int64_t wall_ms;    /* the ask, start to end */
    int64_t model_ms;   /* waiting for the model */
    int64_t tools_ms;   /* running tools */
} ag_loop_stats_t;

/* A loop; NULL + err (ERR_USAGE) when opts lack a provider or a way to
 * run code. */
ag_loop_t *ag_loop_new(const ag_loop_opts_t *opts, err_t *err);
void ag_loop_destroy(ag_loop_t **p);

/* One question, answered with as many steps as needed (see above).
 * `ui` (borrowed, may be NULL) is used for this call only; `stats` may be
 * NULL. Returns 0 when the model answered or the step limit was reached
 * (stats->hit_max_steps; a notice says so), or -1 with err:
 *   ERR_INTERRUPTED  the cancel flag was set (the provider stopped, or
 *                    the running cell was interrupted);
 *   ERR_PROVIDER     the model could not be reached (after retries);
 *   ERR_USAGE        a replay ran out of recorded turns;
 *   ERR_KERNEL       the kernel died and no fresh one could be started;
 *   ERR_IO           the recording (--record) or autosave failed.
 * The recorder holds the session so far in every case. */
int ag_loop_ask(ag_loop_t *loop, const char *question, const ag_loop_ui_t *ui,
                ag_loop_stats_t *stats, err_t *err);

/* Async-signal-safe: stop the current ask as soon as possible (only when
 * the loop uses its own flag). ag_loop_ask clears the flag when it starts. */
void ag_loop_cancel(ag_loop_t *loop);

/* The text of the model's last answer, "" before any. Borrowed. */
const char *ag_loop_answer(const ag_loop_t *loop);
/* Totals over every ask of this loop. */
ag_loop_stats_t ag_loop_totals(const ag_loop_t *loop);

/* A borrowed view, valid while the loop lives. */
ag_provider_t *ag_loop_provider(ag_loop_t *loop);

/* Talk to another model from the next turn on; the conversation carries
 * over (it is provider-neutral). Steals *provider (set to NULL). */
void ag_loop_set_provider(ag_loop_t *loop, ag_provider_t **provider);

/* Refresh metadata.jupyter_agent and write the notebook atomically.
 * 0, or -1 + err (ERR_IO). */
int ag_loop_save(ag_loop_t *loop, const char *path, err_t *err);

#endif
