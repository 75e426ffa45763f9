/*
 * e2b_envelope: an incremental reader of a Connect client stream's
 * request body (connectrpc.com/docs/protocol, "Streaming-Request"): a
 * run of envelopes, each a flags byte, a 4-byte big-endian length and a
 * JSON message, fed in whatever pieces the connection delivers them.
 * Bounds: one message at most `max_message` bytes (the length is checked
 * before a byte of it is kept), compressed envelopes refused (we announce
 * no Connect-Content-Encoding), each message a JSON object. No I/O, so it
 * is fuzzed alone (tests/fuzz/e2b_envelope.c).
 */
#ifndef AGENT_E2B_E2B_ENVELOPE_H
#define AGENT_E2B_E2B_ENVELOPE_H

#include "common/err.h"

#include <jansson.h>
#include <stddef.h>

typedef struct e2b_envreader e2b_envreader_t;

/* Called with each complete message (borrowed). 0 to read on, -1 (with
 * err filled) to stop the stream. */
typedef int (*e2b_envreader_fn)(void *ctx, const json_t *msg, err_t *err);

e2b_envreader_t *e2b_envreader_new(size_t max_message, e2b_envreader_fn fn,
                                   void *ctx);
void e2b_envreader_destroy(e2b_envreader_t **p);

/* Take `len` more bytes. 0, or -1 + err: a bad envelope, or fn stopped
 * the stream. After a failure every call answers -1 (err unchanged). */
int e2b_envreader_feed(e2b_envreader_t *r, const void *data, size_t len,
                       err_t *err);
/* The body is over: 0 when it ended between envelopes, -1 + err when in
 * the middle of one (or after a failure). */
int e2b_envreader_finish(e2b_envreader_t *r, err_t *err);
/* Messages handed to fn so far. */
size_t e2b_envreader_count(const e2b_envreader_t *r);

#endif
