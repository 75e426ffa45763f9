/*
 * ag_tools: the tools offered to the model, in one place: their names,
 * descriptions and JSON Schemas, their handlers, and how one execution in
 * the kernel becomes a tool result for the model and a cell for the
 * notebook.
 *
 * Built-in tools (see s_builtin in ag_tools.c; register new ones there or
 * with ag_tools_add):
 *   python      {code: string}  run code in the session's kernel; state
 *                               persists between calls
 *   list_files  {}              the files in /mnt/data with their sizes
 * and, added by ag_loop when the session has --packages DIR:
 *   install_packages {names: [string]}  signed wheels
 * (agent/loop/ag_packages_tool.h)
 *
 * What the model gets back from `python` (ag_tools_result_from_exec):
 *   - stream text, execute_result / display_data as text/plain (a
 *     DataFrame as its text/plain table), errors as "ename: evalue" plus the
 *     traceback with ANSI codes stripped;
 *   - PNG/JPEG images as image inputs (at most max_images per result; the
 *     text says which were left out and why);
 *   - a status line when the cell timed out, was interrupted, or the
 *     kernel died (the model is told a fresh kernel was started and its
 *     variables are gone);
 *   - the whole text cut to a budget, head and tail kept around a marker
 *     "[… N bytes omitted …]".
 * Invalid calls (arguments that are not a JSON object, a missing or
 * non-string `code`, an unknown tool) become error results the model can
 * correct; they never end the loop.
 *
 * Ownership: an ag_tools_t owns its table and the schemas array. A result
 * owns every string, image and JSON reference in it until
 * ag_tool_result_release.
 */
#ifndef AGENT_LOOP_AG_TOOLS_H
#define AGENT_LOOP_AG_TOOLS_H

#include "agent/llm/ag_conv.h"
#include "agent/session/ag_session.h"
#include "common/err.h"
#include "kernel-bridge/kb_output.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Defaults for ag_tool_env_t fields left 0. */
#define AG_TOOLS_TEXT_BUDGET ((size_t)16 * 1024)
#define AG_TOOLS_MAX_IMAGES 4
/* A PNG bigger than this (base64 bytes) or wider or taller than this
 * (pixels) is scaled down for the model; other images are described, not
 * attached. Providers refuse images over about 5 MB, and Anthropic scales
 * anything over 1568 pixels a side down itself. Per result, images share
 * a budget. */
#define AG_TOOLS_MAX_IMAGE_B64 ((size_t)5 * 1000 * 1000)
#define AG_TOOLS_MAX_IMAGE_SIDE 1568u
#define AG_TOOLS_IMAGE_BUDGET_B64 ((size_t)16 * 1000 * 1000)

typedef struct ag_tools ag_tools_t;

/* Where tools run: the session's kernel and workspace, reached through
 * callbacks so that `ask` (which owns its session) and the agent kernel
 * (whose session may be replaced after a death) fit the same handlers. */
typedef struct ag_tool_env {
    /* Run `code` in the kernel, filling `out`; returns as
     * kb_kernel_execute (0 ran, even if it raised; -1 + ERR_TIMEOUT,
     * ERR_KERNEL, ERR_INTERRUPTED). Required. */
    int (*run_python)(void *arg, const char *code, kb_output_t *out,
                      err_t *err);
    /* The kernel died in run_python: start a fresh one. 0, or -1 + err.
     * NULL when run_python replaces a dead kernel by itself. */
    int (*restart)(void *arg, err_t *err);
    /* The session now (for its workspace and kernel), or NULL. */
    ag_session_t *(*session)(void *arg);
    void *arg;               /* passed to the three callbacks */
    kb_displays_t *displays; /* session-wide display_id registry, or NULL */
    size_t max_output_bytes; /* kb_output cap per execution; 0 = 64 MiB */
    size_t text_budget;      /* bytes of result text; 0 = 16 KiB */
    size_t max_images;       /* images per result; 0 = 4 */
    size_t max_image_bytes;  /* base64 bytes per image; 0 = 5 MB (a bigger
                                PNG is scaled down, docs/outputs.md) */
    unsigned max_image_side; /* pixels per side; 0 = 1568 */
    size_t image_budget;     /* base64 bytes of images per result; 0 = 16 MB */
} ag_tool_env_t;

/* What one tool call produced: the answer for the model and, when the
 * call ran something, the cell for the notebook. */
typedef struct ag_tool_result {
    char *text;            /* for the model, owned; never NULL once filled */
    bool is_error;         /* the call failed (bad arguments, raised, died) */
    ag_image_t *images;    /* owned array; its mime and data strings owned */
    size_t nimages;        /* number of images attached */
    char *cell_source;     /* notebook code cell source, owned; NULL = none */
    json_t *cell_outputs;  /* owned reference to the cell's output array */
    json_t *cell_meta;     /* owned object merged into the cell's metadata
                              under "jupyter_agent", or NULL */
    int execution_count;   /* the cell's count, -1 when none */
    char start_iso[32];    /* when the execution started ("" = unknown) */
    char end_iso[32];      /* when it ended ("" = unknown) */
    long long duration_ms; /* time spent running, 0 when nothing ran */
    bool kernel_restarted; /* the kernel died and a fresh one was started */
    char *status; /* owned one-line note when the execution did not finish
                     normally (timed out, interrupted, died), else NULL */
} ag_tool_result_t;

/* Zero a result (execution_count -1). */
void ag_tool_result_init(ag_tool_result_t *r);
/* Free what a result owns and re-initialise it. */
void ag_tool_result_release(ag_tool_result_t *r);

/* A handler: fill `res` (initialised by the caller). Return 0 when the
 * call is answered, also when the answer is an error the model should
 * see. Return -1 + err only for what must end the loop: ERR_INTERRUPTED
 * (the user stopped it) or ERR_KERNEL (the kernel died and no fresh one
 * could be started); `res` may still hold a cell worth recording and a
 * text for the model. `args` is the parsed arguments object (borrowed). */
typedef int (*ag_tool_fn)(const ag_tool_env_t *env, const json_t *args,
                          void *tool_arg, ag_tool_result_t *res, err_t *err);

/* One tool. Strings are borrowed and must outlive the table (string
 * literals in practice). */
typedef struct ag_tool_def {
    const char *name;        /* e.g. "python" */
    const char *description; /* for the model */
    const char *parameters;  /* JSON Schema of the arguments, as JSON text */
    ag_tool_fn fn;           /* the handler */
    void *arg;               /* passed to fn as tool_arg (borrowed) */
} ag_tool_def_t;

/* A table holding the built-in tools. Never NULL. */
ag_tools_t *ag_tools_new(void);
void ag_tools_destroy(ag_tools_t **p);

/* Add (or replace, by name) a tool. -1 + ERR_USAGE when its parameters
 * are not a JSON object or a field is missing. */
int ag_tools_add(ag_tools_t *t, const ag_tool_def_t *def, err_t *err);

/* The tools in the provider-neutral form ag_provider_turn takes:
 *   [{"name", "description", "parameters"}]
 * Borrowed, valid until the table changes or is destroyed. */
const json_t *ag_tools_schemas(ag_tools_t *t);
/* The descriptions name the sandbox's /mnt/data; for a kernel whose files
 * are elsewhere (a gateway kernel's private directory) the schemas name
 * `dir` instead (copied; NULL = /mnt/data). */
void ag_tools_set_workdir(ag_tools_t *t, const char *dir);
/* A tool description written for the local box, `text`, with /mnt/data
 * replaced by the directory set above (unchanged when none). New string. */
char *ag_tools_describe(const ag_tools_t *t, const char *text);

/* Run one call: parse its arguments, find the tool, run the handler.
 * Always fills `res` with a text for the model. Returns as the handler
 * (bad arguments and unknown tools are answered: 0 with is_error). */
int ag_tools_call(ag_tools_t *t, const ag_tool_env_t *env,
                  const ag_tool_call_t *call, ag_tool_result_t *res,
                  err_t *err);

/* ---- The python tool, for tables that wrap it ---------------------------- */

/* What the model is told about `python`, and the schema of its `code`
 * argument (a JSON fragment), so that a front end offering the tool with
 * more arguments (the MCP server's `timeout`) describes it the same way. */
#define AG_TOOLS_PYTHON_DESCRIPTION                                            \
    "Run Python code in the session's IPython kernel, like a Jupyter "         \
    "notebook cell. State persists between calls (variables, imports, "        \
    "files). Returns what the cell printed, the value of its last "            \
    "expression, errors with their traceback, and the images of plots "        \
    "(call plt.show() to see a figure). Input files are in /mnt/data; save "   \
    "files for the user in /mnt/data/out/. Long output is cut: print "         \
    "summaries rather than whole tables."
#define AG_TOOLS_PYTHON_CODE_SCHEMA                                            \
    "\"code\": {\"type\": \"string\", \"description\": \"Python source to "    \
    "run as one notebook cell\"}"

/* The built-in `python` handler: runs args.code (other members are
 * ignored) through env->run_python, restarting a dead kernel through
 * env->restart, and fills `res` (ag_tools_result_from_exec). */
int ag_tools_python(const ag_tool_env_t *env, const json_t *args,
                    void *tool_arg, ag_tool_result_t *res, err_t *err);

/* ---- Helpers for handlers ---------------------------------------------- */

/* Fill `res` from one finished execution of `source`: the model's text
 * and images from the outputs of `out` (borrowed), the status of `rc` /
 * `xerr` (what run_python returned), `restarted_note` (NULL, or what
 * happened after a death, e.g. "a fresh kernel was started ...") and the
 * notebook cell (the outputs plus a status output when the execution did
 * not finish normally). */
void ag_tools_result_from_exec(ag_tool_result_t *res, const ag_tool_env_t *env,
                               const char *source, kb_output_t *out, int rc,
                               const err_t *xerr, const char *restarted_note);

/* `text` cut to at most about `budget` bytes: head and tail kept (cut at
 * line or UTF-8 character boundaries) around "\n[… N bytes omitted …]\n".
 * A text within the budget comes back unchanged. New string. */
char *ag_tools_truncate(const char *text, size_t budget);

/* A size for people: "812 B", "4.2 KiB", "1.3 MiB". Writes into buf. */
const char *ag_tools_human_size(long long bytes, char *buf, size_t size);

#endif
