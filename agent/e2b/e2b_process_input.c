/* e2b_process_input: process.Process/StreamInput, a Connect client
 * stream, read envelope by envelope as the body arrives (e2b_envelope)
 * and written to the command as each message completes. */
#include "agent/e2b/e2b_process.h"

#include "agent/e2b/e2b_connect.h"
#include "agent/e2b/e2b_envelope.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

struct e2b_pinput {
    e2b_sandbox_t *sb;   /* borrowed: the request holds its entry */
    e2b_envreader_t *rd; /* owned */
    unsigned id;         /* the command, once the start message named it */
    const char *code;    /* the first failure's Connect code, or NULL */
    err_t err;           /* its text */
};

static int
s_message(void *ctx, const json_t *msg, err_t *err)
{
    e2b_pinput_t *u = ctx;
    const char *code = "invalid_argument";
    if (e2b_process_stream_input(u->sb, msg, &u->id, &code, err) == 0)
        return 0;
    u->code = code;
    return -1;
}

e2b_pinput_t *
e2b_process_input_begin(e2b_req_t *r, e2b_sandbox_t *sb)
{
    e2b_pinput_t *u = xcalloc(1, sizeof *u);
    u->sb = sb;
    u->rd = e2b_envreader_new(E2B_PROCESS_INPUT_MAX_MESSAGE, s_message, u);
    if (!e2b_connect_is_stream(r)) {
        u->code = "invalid_argument";
        err_set(&u->err, ERR_USAGE,
                "StreamInput is a client stream: send Content-Type "
                "application/connect+json and enveloped messages");
    }
    return u;
}

void
e2b_process_input_data(e2b_pinput_t *u, const char *data, size_t len)
{
    if (u->code) { /* failed: what still comes is discarded */
        e2b_envreader_destroy(&u->rd);
        return;
    }
    if (e2b_envreader_feed(u->rd, data, len, &u->err) < 0) {
        if (!u->code)
            u->code = "invalid_argument"; /* the framing, not a message */
        e2b_envreader_destroy(&u->rd);
    }
}

void
e2b_process_input_end(e2b_pinput_t **p, e2b_req_t *r)
{
    e2b_pinput_t *u = *p;
    if (!u->code && e2b_envreader_finish(u->rd, &u->err) < 0)
        u->code = "invalid_argument";
    if (!u->code && e2b_envreader_count(u->rd) == 0) {
        u->code = "invalid_argument";
        err_set(&u->err, ERR_USAGE,
                "the stream ended before its start message");
    }
    if (u->code) {
        e2b_connect_error(r, u->code, "%s", u->err.text);
    } else {
        size_t l1 = 0, l2 = 0;
        char *a = e2b_connect_envelope(0x00, "{}", 2, &l1);
        char *b = e2b_connect_envelope(0x02, "{}", 2, &l2);
        a = xrealloc(a, l1 + l2);
        memcpy(a + l1, b, l2);
        e2b_reply(r, 200, "application/connect+json", a, l1 + l2);
        free(a);
        free(b);
    }
    e2b_process_input_free(p);
}

void
e2b_process_input_free(e2b_pinput_t **p)
{
    if (!*p)
        return;
    e2b_envreader_destroy(&(*p)->rd);
    free(*p);
    *p = NULL;
}
