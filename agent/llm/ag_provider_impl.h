/*
 * ag_provider_impl: private to agent/llm/ag_provider*.c and ag_turn.c.
 * The generic part owns the retry loop and the HTTP transfer
 * (ag_provider_http.c), construction, replay and recording
 * (ag_provider.c); a wire format (openai, anthropic) only builds the
 * request and interprets events or a whole body, through the ag_ts_*
 * helpers (ag_turn.c) that assemble a turn and call the user's callbacks.
 * Calls go provider -> provider_http -> turn; ag_turn.c calls none of
 * the others.
 */
#ifndef AGENT_LLM_AG_PROVIDER_IMPL_H
#define AGENT_LLM_AG_PROVIDER_IMPL_H

#include "agent/llm/ag_http.h"
#include "agent/llm/ag_provider.h"
#include "agent/llm/ag_sse.h"
#include "common/buf.h"

#include <stdbool.h>
#include <stdio.h>

/* The most tool calls (or content blocks) one turn may carry. */
#define AG_MAX_CALL_INDEX 256

/* One HTTP request, built per turn. All owned. */
typedef struct ag_request {
    char *url;        /* full endpoint URL */
    char *body;       /* JSON text */
    char *headers[8]; /* "Name: value" lines, NULL-terminated; may carry
                         the key: never print them */
} ag_request_t;

void ag_request_release(ag_request_t *r);

typedef struct ag_provider_ops ag_provider_ops_t;

struct ag_provider {
    const ag_provider_ops_t *ops; /* wire format; NULL for replay */
    char *spec;                   /* canonical "name:model" */
    char *model;                  /* model name sent to the server */
    char *base_url;               /* endpoint base, no trailing '/' */
    char *key;                    /* API key or NULL; never printed */
    int stream;                   /* ask for SSE (1) or a whole body (0) */
    long max_tokens;              /* output limit; 0 = provider default */
    int max_tries;                /* total tries per turn, >= 1 */
    long retry_base_ms;           /* first backoff delay */
    long read_timeout_s;          /* abort after this long without bytes */
    const atomic_int *cancel;     /* borrowed; may be NULL */
    FILE *record;                 /* recording being written, or NULL */
    ag_usage_t total;             /* usage over the object's life */
    ag_http_t *http;              /* curl handle, created on first use */
    json_t *replay;               /* replay: array of recorded turns */
    size_t replay_pos;            /* replay: next turn to play */
    char *replay_path;            /* replay: the file, for messages */
};

/* A tool call being assembled (by index). */
typedef struct ag_call_acc {
    buf_t id;    /* call id */
    buf_t name;  /* tool name */
    buf_t args;  /* arguments JSON text, concatenated fragments */
    int started; /* a fragment for this index arrived */
} ag_call_acc_t;

/* The state of one attempt at a turn. */
typedef struct ag_turn_state {
    ag_provider_t *p;         /* borrowed */
    const ag_stream_cb_t *cb; /* borrowed; may be NULL */
    buf_t text;               /* assistant text so far */
    ag_call_acc_t *calls;     /* by index; ncalls = highest index + 1 */
    size_t ncalls;            /* slots in calls */
    enum ag_stop stop;        /* stop reason seen (AG_STOP_END default) */
    int stop_seen;            /* a stop/finish reason arrived */
    ag_usage_t usage;         /* tokens reported */
    int done;                 /* the stream's terminator arrived */
    int delivered;            /* a callback has been called */
    int server_error;         /* the server reported an error in-band */
    int retryable;            /* ... and it may be retried */
    char srv_type[64];        /* in-band error: its type */
    char srv_msg[400];        /* in-band error: the server's message */
    err_t err;                /* why an event was rejected */
    ag_sse_t *sse;            /* SSE parser (stream mode) */
    int json_body;            /* a 2xx "stream" arrived as plain JSON */
    buf_t raw;                /* that JSON body */
} ag_turn_state_t;

struct ag_provider_ops {
    const char *name;     /* "openai" */
    const char *key_env;  /* "OPENAI_API_KEY" */
    const char *base_env; /* "OPENAI_BASE_URL" */
    /* Build the request for this conversation; -1 + err on failure. */
    int (*request)(const ag_provider_t *p, const ag_conv_t *conv,
                   const json_t *tools, ag_request_t *req, err_t *err);
    /* One SSE event; -1 + err to abort (malformed, server error). */
    int (*on_event)(ag_turn_state_t *st, const char *type, const char *data,
                    size_t len, err_t *err);
    /* A whole (non-streamed) response body; -1 + err on failure. */
    int (*on_body)(ag_turn_state_t *st, const json_t *body, err_t *err);
};

extern const ag_provider_ops_t ag_openai_ops;
extern const ag_provider_ops_t ag_anthropic_ops;

/* Turn assembly, used by the wire formats. */
void ag_ts_text(ag_turn_state_t *st, const char *s, size_t len);
/* Note call `index` with its id and/or name (either may be NULL); calls
 * on_tool_call_start when the name first becomes known. */
int ag_ts_call(ag_turn_state_t *st, size_t index, const char *id,
               const char *name, err_t *err);
int ag_ts_call_args(ag_turn_state_t *st, size_t index, const char *frag,
                    size_t len, err_t *err);
void ag_ts_stop(ag_turn_state_t *st, enum ag_stop stop);
/* An in-band error from the server (error event or error object): sets
 * err and returns -1. Retryable when `type` names a transient condition
 * and nothing was delivered yet. */
int ag_ts_server_error(ag_turn_state_t *st, const char *type,
                       const char *message, err_t *err);
/* "malformed JSON" error with a short, sanitised snippet of `data`. */
int ag_ts_malformed(ag_turn_state_t *st, const char *where, const char *data,
                    size_t len, const char *why, err_t *err);

/* JSON members are read with common/jget.h. */
/* One neutral tool {name, description, parameters} as a provider wants it:
 * {"name", "description", SCHEMA_KEY: the JSON Schema} (new reference), or
 * NULL + ERR_USAGE naming `who` and the tool's index when it has no name.
 * A missing schema becomes an empty object schema. */
json_t *ag_provider_tool_spec(const json_t *tool, size_t index, const char *who,
                              const char *schema_key, err_t *err);

/* ag_turn.c: one turn's request and assembly, shared by ag_provider.c,
 * ag_provider_http.c and the wire formats (above, the ag_ts_* they call). */
void ag_ts_init(ag_turn_state_t *st, ag_provider_t *p,
                const ag_stream_cb_t *cb);
void ag_ts_release(ag_turn_state_t *st);
/* Move the assembled turn into `out`. */
void ag_ts_to_turn(ag_turn_state_t *st, ag_turn_t *out);
/* At most `max` bytes of s[0..len) into out[size], control bytes as
 * spaces, cut at a character boundary, "..." marking a cut. */
void ag_snippet(const char *s, size_t len, size_t max, char *out, size_t size);
/* `url` without user, password and options, for messages (libcurl's
 * parse; "(a URL that does not parse)" otherwise). */
void ag_safe_url(const char *url, char *out, size_t size);
/* Is `url` an http or https URL that libcurl parses? */
bool ag_url_is_http(const char *url);
/* One turn over HTTP with p->max_tries tries (ag_provider_http.c). */
int ag_provider_http_turn(ag_provider_t *p, const ag_conv_t *conv,
                          const json_t *tools, const ag_stream_cb_t *cb,
                          ag_turn_t *out, err_t *err);

#endif
