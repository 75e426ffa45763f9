/*
 * ag_provider: one LLM provider; one call per model turn.
 *
 *   ag_provider_t *p = ag_provider_new(NULL, &err);   // JUPYTER_AGENT_MODEL
 *   ag_turn_t turn = {0};
 *   if (ag_provider_turn(p, conv, tools, &cb, &turn, &err) < 0) ...
 *   ag_conv_add_assistant(conv, turn.text, turn.calls, turn.ncalls);
 *   ag_turn_release(&turn);
 *
 * Specs ("--model" values):
 *   openai:MODEL        OpenAI Chat Completions, or any compatible server
 *                       (vLLM, llama.cpp, Ollama, LM Studio) via
 *                       OPENAI_BASE_URL. MODEL may itself contain ':'.
 *   anthropic:MODEL     Anthropic Messages API.
 *   replay:FILE         plays back a file written by the recorder.
 *   MODEL               without a prefix: "claude*" means anthropic, anything
 *                       else openai.
 * Environment, read by ag_provider_new:
 *   JUPYTER_AGENT_MODEL  spec used when `spec` is NULL or "";
 *   OPENAI_API_KEY, OPENAI_BASE_URL (default https://api.openai.com/v1);
 *   ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL (default https://api.anthropic.com);
 *   JUPYTER_AGENT_MAX_TRIES (default 4), JUPYTER_AGENT_RETRY_BASE_MS (default
 *   1000), JUPYTER_AGENT_READ_TIMEOUT (seconds without a byte, default 300),
 *   JUPYTER_AGENT_STREAM=0 (ask for whole responses instead of SSE).
 * With no spec and no JUPYTER_AGENT_MODEL, a set OPENAI_API_KEY selects
 * openai:gpt-4o, else a set ANTHROPIC_API_KEY selects
 * anthropic:claude-sonnet-4-5; with neither the error names the variables.
 * A key is required for the default endpoints; with a custom base URL it is
 * optional (local servers usually need none).
 *
 * Tools are passed as a JSON array in neutral form:
 *   [{"name": "python", "description": "...", "parameters": {JSON Schema}}]
 * and converted by each provider. NULL or [] offers no tools.
 *
 * Retries: HTTP 429, 500, 502, 503, 504, 529, connection failures, timeouts
 * and a stream that ends early are retried with exponential backoff and
 * jitter (or the server's retry-after / retry-after-ms, capped at 60 s) as
 * long as nothing was delivered to the callbacks yet; after max tries the
 * error says what happened, how many tries, and the server's last message.
 *
 * Secrets: the API key goes into one request header and nowhere else: not
 * into errors, logs, the recording or the request body.
 *
 * Not thread-safe: one turn at a time per provider object; only the cancel
 * flag may be touched from elsewhere (a signal handler or another thread).
 */
#ifndef AGENT_LLM_AG_PROVIDER_H
#define AGENT_LLM_AG_PROVIDER_H

#include "agent/llm/ag_conv.h"
#include "common/err.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ag_provider ag_provider_t;

/* Token counts as reported by the server (0 when it reported none). */
typedef struct ag_usage {
    int64_t input_tokens;  /* prompt tokens */
    int64_t output_tokens; /* completion tokens */
    int64_t turns;         /* successful turns counted (ag_provider_usage) */
    int64_t requests;      /* HTTP requests made, retries included */
} ag_usage_t;

/* Why the model stopped. */
enum ag_stop {
    AG_STOP_END = 0,        /* finished its answer */
    AG_STOP_TOOL_USE = 1,   /* wants the tool calls run */
    AG_STOP_MAX_TOKENS = 2, /* hit the output token limit */
    AG_STOP_OTHER = 3       /* content filter, refusal, unknown reason */
};

/* One model turn. Owned by the caller's struct: every string and the calls
 * array are owned by the turn and freed by ag_turn_release(). */
typedef struct ag_turn {
    const char *text;            /* the assistant's text, "" when none */
    const ag_tool_call_t *calls; /* tool calls in the order given; arguments
                                    are the exact JSON text sent ("{}" when
                                    the model sent none) */
    size_t ncalls;               /* number of tool calls */
    enum ag_stop stop;           /* why the model stopped */
    ag_usage_t usage;            /* this turn's tokens (turns = 1) */
} ag_turn_t;

/* Free what a turn owns and zero it. Accepts a zeroed turn. */
void ag_turn_release(ag_turn_t *t);

/* Streaming callbacks, all optional; `arg` is passed back. Strings are
 * borrowed for the duration of the call. */
typedef struct ag_stream_cb {
    void (*on_text_delta)(const char *text, size_t len, void *arg);
    void (*on_tool_call_start)(const char *name, void *arg);
    void *arg;
} ag_stream_cb_t;

/* New provider from `spec` (NULL or "" = JUPYTER_AGENT_MODEL) and the
 * environment. NULL + err (ERR_USAGE for a bad spec or missing
 * configuration, ERR_IO for an unreadable replay file). */
ag_provider_t *ag_provider_new(const char *spec, err_t *err);
void ag_provider_destroy(ag_provider_t **p);

/* Run one model turn over `conv` (borrowed) offering `tools` (borrowed,
 * may be NULL). `out` is overwritten (release a previous turn first).
 * Returns 0, or -1 with err: ERR_PROVIDER (HTTP, protocol or network
 * failure), ERR_INTERRUPTED (the cancel flag was set), ERR_IO (the
 * recording could not be written), ERR_USAGE (replay ran out of turns).
 * On failure `out` is left zeroed. */
int ag_provider_turn(ag_provider_t *p, const ag_conv_t *conv,
                     const json_t *tools, const ag_stream_cb_t *cb,
                     ag_turn_t *out, err_t *err);

/* Tokens summed over every successful turn of this object. */
ag_usage_t ag_provider_usage(const ag_provider_t *p);

/* "openai", "anthropic" or "replay". Borrowed. */
const char *ag_provider_name(const ag_provider_t *p);
/* The canonical spec, e.g. "openai:gpt-4o" (for a replay, the model named
 * in the recording's header). Borrowed. */
const char *ag_provider_model(const ag_provider_t *p);

/* Cancel flag, borrowed for the provider's lifetime (NULL to remove). While
 * *flag is non-zero a turn in progress fails promptly with ERR_INTERRUPTED
 * and new turns fail at once; the caller clears it. */
void ag_provider_set_cancel(ag_provider_t *p, const atomic_int *flag);

/* Append every successful turn to `path` as one JSON line (truncating the
 * file and writing the header line first). NULL stops recording.
 * Format (neutral, not a provider's wire format):
 *   {"jupyter_agent_replay": 1, "model": "openai:gpt-4o"}
 *   {"text": "...", "tool_calls": [{"id","name","arguments"}],
 *    "stop_reason": "end|tool_use|max_tokens|other",
 *    "usage": {"input_tokens": N, "output_tokens": N}}
 * Returns 0 or -1 + err (ERR_IO). */
int ag_provider_set_record(ag_provider_t *p, const char *path, err_t *err);

/* Ask for whole responses (0) instead of a server-sent event stream (1,
 * the default unless JUPYTER_AGENT_STREAM=0). The callbacks are still
 * called, once with the whole text. */
void ag_provider_set_stream(ag_provider_t *p, int stream);
/* Retry policy: total tries (>= 1) and the first backoff in ms. */
void ag_provider_set_retry(ag_provider_t *p, int max_tries, long base_ms);

#endif
