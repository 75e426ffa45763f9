/*
 * e2b_connect: the Connect protocol (connectrpc.com/docs/protocol) with
 * JSON messages, as the E2B SDKs speak it to envd (they set
 * useBinaryFormat: false). No I/O of its own beyond e2b_http.
 *
 * Unary calls: POST /pkg.Service/Method, Content-Type application/json,
 * the request message as the body; the answer is the response message
 * (200) or an error {"code": "not_found", "message": ...} with the HTTP
 * status Connect maps the code to.
 * Server streams: Content-Type application/connect+json; the body is one
 * envelope (a flags byte, a 4-byte big-endian length, the JSON message);
 * the answer is 200 with envelopes, the last one flagged 0x02 holding
 * {} or {"error": {"code", "message"}}.
 */
#ifndef AGENT_E2B_E2B_CONNECT_H
#define AGENT_E2B_E2B_CONNECT_H

#include "agent/e2b/e2b_http.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest request message accepted (bytes of JSON). */
#define E2B_CONNECT_MAX_MESSAGE ((size_t)8 << 20)

/* Is the request a streaming call (application/connect+json)? */
bool e2b_connect_is_stream(const e2b_req_t *r);
/* The request message (new reference), or NULL after answering the
 * error (invalid_argument) itself. */
json_t *e2b_connect_request(e2b_req_t *r);

/* The HTTP status Connect gives an error code ("not_found" -> 404). */
unsigned e2b_connect_status(const char *code);

/* Unary: answer `msg` (stolen). */
void e2b_connect_reply(e2b_req_t *r, json_t *msg);
/* An error in the shape the request expects: for a unary call the
 * status and {"code","message"}; for a stream, 200 and an end-of-stream
 * envelope carrying the error. */
void e2b_connect_error(e2b_req_t *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A server stream: 200, application/connect+json. NULL when it could not
 * be opened (answered). */
e2b_stream_t *e2b_connect_stream_open(e2b_req_t *r);
/* One message envelope (msg borrowed). */
void e2b_connect_stream_send(e2b_stream_t *st, const json_t *msg);
/* The end-of-stream envelope, with an error when `code` is not NULL, then
 * e2b_stream_close. */
void e2b_connect_stream_end(e2b_stream_t **st, const char *code,
                            const char *message);

/* The envelope framing, for tests and callers that build bodies:
 * `len` bytes of `json` framed with `flags` into a new buffer (*out_len). */
char *e2b_connect_envelope(unsigned char flags, const char *json, size_t len,
                           size_t *out_len);

#endif
