/*
 * ag_conv: a provider-neutral transcript of one conversation with a model.
 *
 * A conversation is a system prompt plus an ordered list of messages:
 *   AG_MSG_USER         text typed by the user (or the program);
 *   AG_MSG_ASSISTANT    the model's text and the tool calls it asked for;
 *   AG_MSG_TOOL_RESULT  the answer to one tool call: text, an error flag and
 *                       images (base64, e.g. PNG plots).
 * Each provider converts this list to its wire format per request; nothing
 * here knows about a wire format.
 *
 * Ownership: every append function copies the strings it is given, so the
 * caller keeps ownership of its arguments. The conversation owns its
 * messages; ag_conv_get() returns borrowed views valid until the next append
 * or ag_conv_destroy(). The `const char *` fields of the view structs below
 * are therefore never freed by the caller.
 *
 * Invariants: strings stored are never NULL (NULL arguments are stored as
 * ""); tool-call arguments are stored exactly as given (a JSON text, not
 * re-serialised), so a recording replays byte for byte.
 */
#ifndef AGENT_LLM_AG_CONV_H
#define AGENT_LLM_AG_CONV_H

#include "common/err.h"

#include <jansson.h>
#include <stddef.h>

typedef struct ag_conv ag_conv_t;

/* One tool call requested by the model. */
typedef struct ag_tool_call {
    const char *id;        /* provider's call id, e.g. "call_abc" / "toolu_1" */
    const char *name;      /* tool name, e.g. "python" */
    const char *arguments; /* the arguments as a JSON text, e.g. {"code":"1"} */
} ag_tool_call_t;

/* One image attached to a tool result. */
typedef struct ag_image {
    const char *mime; /* media type, e.g. "image/png" */
    const char *data; /* base64 of the image bytes, no "data:" prefix */
} ag_image_t;

enum ag_msg_kind {
    AG_MSG_USER = 1,       /* text from the user */
    AG_MSG_ASSISTANT = 2,  /* text and tool calls from the model */
    AG_MSG_TOOL_RESULT = 3 /* the result of one tool call */
};

/* A borrowed view of one message. Fields not used by a kind are ""/0/NULL. */
typedef struct ag_msg {
    enum ag_msg_kind kind;       /* which of the three kinds */
    const char *text;            /* user text, assistant text or result text */
    const ag_tool_call_t *calls; /* assistant: the tool calls, in order */
    size_t ncalls;               /* assistant: number of calls */
    const char *tool_call_id;    /* tool result: id of the call answered */
    const char *name;            /* tool result: name of the tool */
    int is_error;                /* tool result: non-zero if the tool failed */
    const ag_image_t *images;    /* tool result: attached images */
    size_t nimages;              /* tool result: number of images */
} ag_msg_t;

/* New conversation with a system prompt (NULL or "" for none). */
ag_conv_t *ag_conv_new(const char *system);
void ag_conv_destroy(ag_conv_t **p);

/* Replace the system prompt (copied; NULL means none). */
void ag_conv_set_system(ag_conv_t *c, const char *system);
/* The system prompt, "" when none. Borrowed. */
const char *ag_conv_system(const ag_conv_t *c);

void ag_conv_add_user(ag_conv_t *c, const char *text);
/* The model's turn: `text` may be NULL or "", `calls` may be NULL when
 * ncalls is 0. */
void ag_conv_add_assistant(ag_conv_t *c, const char *text,
                           const ag_tool_call_t *calls, size_t ncalls);
void ag_conv_add_tool_result(ag_conv_t *c, const char *tool_call_id,
                             const char *name, const char *text, int is_error,
                             const ag_image_t *images, size_t nimages);

/* Number of messages (the system prompt is not counted). */
size_t ag_conv_count(const ag_conv_t *c);
/* Message i (0-based) or NULL when out of range. Borrowed view. */
const ag_msg_t *ag_conv_get(const ag_conv_t *c, size_t i);

/* The whole conversation as neutral JSON (a new reference):
 *   {"system": "...", "messages": [
 *      {"role": "user", "text": "..."},
 *      {"role": "assistant", "text": "...",
 *       "tool_calls": [{"id", "name", "arguments"}]},
 *      {"role": "tool", "tool_call_id", "name", "text", "is_error",
 *       "images": [{"mime", "data"}]}]}
 * Useful for saving a session and for debugging. */
json_t *ag_conv_to_json(const ag_conv_t *c);
/* The inverse of ag_conv_to_json; `j` is borrowed. NULL + err (ERR_USAGE)
 * when j is not of that shape. */
ag_conv_t *ag_conv_from_json(const json_t *j, err_t *err);

#endif
