/*
 * ag_kernel_impl: private to agent/kernel/. The agent kernel's state, shared
 * by its files: ag_kernel.c (life cycle, execute_request, the inner
 * session), ag_kernel_cell.c (what a cell shows: streams, markdown,
 * errors, input), ag_kernel_requests.c (complete, inspect, is_complete,
 * kernel_info, comms), ag_kernel_history.c (history kept across
 * restarts, history_request), ag_kernel_magics.c (%export, %model) and
 * ag_kernel_files.c (%upload, %download).
 */
#ifndef AGENT_KERNEL_AG_KERNEL_IMPL_H
#define AGENT_KERNEL_AG_KERNEL_IMPL_H

#include "agent/kernel/ag_kernel.h"
#include "kernel-bridge/kb_server.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define INNER_REQUEST_MS 10000 /* complete / inspect / is_complete */
#define HISTORY_MAX 10000      /* entries kept for history_request */

struct ag_kernel {
    kb_server_t *server;            /* owned */
    const ag_session_opts_t *inner; /* borrowed; how to start the session */
    ag_kernel_ask_fn ask;           /* what a plain cell does; never NULL */
    ag_session_t *session;          /* owned; NULL until used or after death */
    int64_t session_started_ms;     /* CLOCK_MONOTONIC, when it started */
    int64_t session_used_ms;        /* ... when a cell last used it */
    char *expired_note;             /* owned: why the last session was
                                       stopped, told at the next cell */
    const char *model;              /* --model (borrowed) or model_owned */
    char *model_owned;              /* owned spec set by %model, or NULL */
    nb_record_t *record;            /* owned: the session, for %export */
    int execution_count;            /* of the last cell that stored
                                       history (IPython's In[n] - 1) */
    json_t *info;                   /* owned kernel_info_reply content */
    /* The cell being executed (all reset per execute_request). */
    const kb_msg_t *cell;  /* borrowed execute_request; NULL between cells */
    bool cell_allow_stdin; /* the request allowed input() */
    bool cell_silent;      /* the request was silent */
    int cell_count;        /* the number this cell shows: execution_count
                              + 1, kept only if it stores history */
    bool cell_answered;    /* ag_kernel_answer was called */
    json_t *cell_error;    /* owned {ename, evalue, traceback} or NULL */
    json_t *cell_result;   /* owned text/plain of the execute_result */
    json_t *cell_payload;  /* owned reply payloads of a %%python cell */
    json_t *cell_user_expressions; /* owned: the reply's user_expressions,
                                      evaluated by the inner kernel */
    /* For the loop. */
    void *ask_state;          /* owned through ask_free */
    void (*ask_free)(void *); /* releases ask_state; may be NULL */
    json_t *history;          /* owned [[session, line, input, out]] */
    int history_session;      /* this kernel's session number: one more
                                 than the last in the history file */
    char *history_path;       /* owned: the history file, or NULL */
};

/* How inner outputs are forwarded. */
typedef enum {
    FWD_CELL, /* a %%python cell: execute_result keeps its role */
    FWD_TOOL  /* the agent's code: execute_result becomes display_data */
} fwd_mode_t;

typedef struct fwd {
    ag_kernel_t *k;   /* the kernel */
    fwd_mode_t mode;  /* see above */
    kb_output_t *out; /* the execution's output model (its inner count) */
} fwd_t;

/* Length of the first line of `code` without trailing blanks, and where
 * the rest begins (after the newline; at the NUL when there is none). */
static inline size_t
ag_kernel_first_line(const char *code, const char **rest)
{
    const char *nl = strchr(code, '\n');
    size_t len = nl ? (size_t)(nl - code) : strlen(code);
    *rest = nl ? nl + 1 : code + len;
    while (len && (code[len - 1] == ' ' || code[len - 1] == '\t' ||
                   code[len - 1] == '\r'))
        len--;
    return len;
}

/* Is `code` a %%python cell (after blank lines)? Then *body is the code
 * after the magic's line. */
static inline bool
ag_kernel_python_cell(const char *code, const char **body)
{
    /* IPython drops leading blank lines before looking for a cell magic. */
    for (const char *p = code;
         *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'; p++)
        if (*p == '\n')
            code = p + 1;
    size_t n = ag_kernel_first_line(code, body);
    return n == strlen(AG_KERNEL_MAGIC_PYTHON) &&
           strncmp(code, AG_KERNEL_MAGIC_PYTHON, n) == 0;
}

/* ag_kernel_session.c: stop the inner session when it passed
 * --idle-timeout or --max-lifetime (the next cell that needs Python starts
 * a fresh one and is told why). ag_kernel_session (ag_kernel.h) starts it. */
void ag_kernel_expire(ag_kernel_t *k);

/* Keep an error's {ename, evalue, traceback} (content borrowed) as the
 * cell's, for its execute_reply (ag_kernel_cell.c). */
void ag_kernel_set_cell_error(ag_kernel_t *k, json_t *content);

/* ag_kernel.c: the error name a cell shows for an err_t code. */
const char *ag_kernel_ename(int code);

/* ag_kernel_magics.c: %export PATH, %model [SPEC] (the argument text). */
void ag_kernel_export(ag_kernel_t *k, const char *path);
void ag_kernel_model_magic(ag_kernel_t *k, const char *spec);

/* ag_kernel_files.c: %upload ARGS, %download ARGS (the magic's argument
 * text): files from the kernel's directory into the session's workspace
 * and back, reported on the cell; failures become its error. */
void ag_kernel_upload(ag_kernel_t *k, const char *args);
void ag_kernel_download(ag_kernel_t *k, const char *args);

/* ag_kernel_requests.c: register the handlers of every request but
 * execute_request on k->server. */
void ag_kernel_requests_register(ag_kernel_t *k);

/* ag_kernel_history.c: load earlier kernels' history (best effort), add a
 * cell that stored history, answer history_request. */
void ag_kernel_history_load(ag_kernel_t *k);
void ag_kernel_history_add(ag_kernel_t *k, const char *code);
int ag_kernel_on_history(kb_server_t *s, kb_channel_t ch, const kb_msg_t *req,
                         void *arg);

#endif
