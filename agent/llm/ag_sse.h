/*
 * ag_sse: an incremental parser for text/event-stream (Server-Sent Events),
 * following the WHATWG HTML "Interpreting an event stream" algorithm.
 *
 * Pure: no I/O, no clock. Feed it bytes in chunks of any size (a chunk
 * boundary may fall anywhere, even between the CR and LF of a CRLF); it
 * calls `fn` once per dispatched event. Rules implemented:
 *   - one leading UTF-8 BOM is skipped;
 *   - lines end at "\r\n", "\n" or "\r";
 *   - a line starting with ':' is a comment and is ignored;
 *   - "field:value" with one optional space after the colon stripped;
 *     a line without a colon is a field with an empty value;
 *   - "event" sets the event type, "data" appends value + "\n" to the data
 *     buffer, "id" sets the last event id (unless it contains NUL),
 *     "retry" sets the reconnection time when it is all ASCII digits,
 *     other fields are ignored;
 *   - an empty line dispatches: nothing happens when the data buffer is
 *     empty; otherwise its final "\n" is removed and the event is delivered
 *     with type "message" when no "event" field was seen; event type and
 *     data are then reset (the last event id persists);
 *   - at end of stream an event without its terminating empty line is
 *     discarded (ag_sse_finish reports whether one was pending).
 *
 * Memory: the parser owns its buffers; strings passed to `fn` are borrowed
 * and valid only during the call.
 */
#ifndef AGENT_LLM_AG_SSE_H
#define AGENT_LLM_AG_SSE_H

#include "common/err.h"

#include <stddef.h>

typedef struct ag_sse ag_sse_t;

/* One event: `type` is "message" unless an event field named it; `data` is
 * NUL-terminated and `len` bytes long (it may itself contain NUL bytes);
 * `id` is the last event id ("" if none). Return 0 to go on, non-zero to
 * stop: ag_sse_feed then returns -1 with err untouched. */
typedef int (*ag_sse_event_fn)(const char *type, const char *data, size_t len,
                               const char *id, void *arg);

/* New parser calling fn(…, arg). `max_event` caps the bytes of one line and
 * of one event's data (0 = 8 MiB); past it ag_sse_feed fails. */
ag_sse_t *ag_sse_new(ag_sse_event_fn fn, void *arg, size_t max_event);
void ag_sse_destroy(ag_sse_t **p);

/* Parse `len` more bytes. Returns 0, or -1 when the callback asked to stop
 * (err untouched) or an event exceeded max_event (err filled, ERR_PROVIDER).
 * After -1 the parser must not be fed again. */
int ag_sse_feed(ag_sse_t *p, const char *data, size_t len, err_t *err);

/* End of stream: discard any undispatched event. Returns 1 when something
 * was discarded (a line without its end of line, or fields without their
 * closing empty line), else 0. The parser is then reset for reuse. */
int ag_sse_finish(ag_sse_t *p);

/* The last "retry:" value in milliseconds, or -1 when none was seen. */
long ag_sse_retry_ms(const ag_sse_t *p);
/* Events dispatched so far. */
size_t ag_sse_events(const ag_sse_t *p);

#endif
