#include "agent/e2b/e2b_envelope.h"

#include "common/xalloc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct e2b_envreader {
    size_t max;          /* the largest message */
    e2b_envreader_fn fn; /* borrowed */
    void *ctx;           /* borrowed */
    unsigned char head[5];
    size_t nhead; /* header bytes held (< 5 while reading one) */
    char *msg;    /* owned: the message being read (want bytes) */
    size_t want;  /* its length */
    size_t have;  /* bytes of it held */
    size_t count; /* messages handed out */
    bool failed;  /* every call answers -1 from then on */
    err_t why;    /* the failure, repeated to later callers */
};

e2b_envreader_t *
e2b_envreader_new(size_t max_message, e2b_envreader_fn fn, void *ctx)
{
    e2b_envreader_t *r = xcalloc(1, sizeof *r);
    r->max = max_message;
    r->fn = fn;
    r->ctx = ctx;
    return r;
}

void
e2b_envreader_destroy(e2b_envreader_t **p)
{
    if (!*p)
        return;
    free((*p)->msg);
    free(*p);
    *p = NULL;
}

size_t
e2b_envreader_count(const e2b_envreader_t *r)
{
    return r->count;
}

static int
s_fail(e2b_envreader_t *r, err_t *err)
{
    r->failed = true;
    free(r->msg);
    r->msg = NULL;
    if (err)
        *err = r->why;
    return -1;
}

/* A whole message is in r->msg: parse it and hand it out. */
static int
s_deliver(e2b_envreader_t *r, err_t *err)
{
    json_error_t je;
    json_t *m = json_loadb(r->msg, r->want, JSON_REJECT_DUPLICATES, &je);
    free(r->msg);
    r->msg = NULL;
    r->nhead = 0;
    if (!json_is_object(m)) {
        json_decref(m);
        err_set(&r->why, ERR_USAGE,
                "stream message %zu is not a JSON object (%.200s)",
                r->count + 1, m ? "another JSON value" : je.text);
        return s_fail(r, err);
    }
    r->count++;
    int rc = r->fn(r->ctx, m, &r->why);
    json_decref(m);
    return rc < 0 ? s_fail(r, err) : 0;
}

int
e2b_envreader_feed(e2b_envreader_t *r, const void *data, size_t len, err_t *err)
{
    if (r->failed)
        return s_fail(r, err);
    const unsigned char *p = data;
    while (len > 0) {
        if (r->nhead < 5) {
            size_t k = 5 - r->nhead < len ? 5 - r->nhead : len;
            memcpy(r->head + r->nhead, p, k);
            r->nhead += k;
            p += k;
            len -= k;
            if (r->nhead < 5)
                break;
            const unsigned char *h = r->head;
            if (h[0] & 0x01) {
                err_set(&r->why, ERR_USAGE,
                        "stream message %zu is compressed; send it "
                        "uncompressed (no Connect-Content-Encoding)",
                        r->count + 1);
                return s_fail(r, err);
            }
            r->want = ((size_t)h[1] << 24) | ((size_t)h[2] << 16) |
                      ((size_t)h[3] << 8) | h[4];
            if (r->want > r->max) {
                err_set(&r->why, ERR_USAGE,
                        "stream message %zu is %zu bytes, over the limit "
                        "of %zu",
                        r->count + 1, r->want, r->max);
                return s_fail(r, err);
            }
            r->msg = xmalloc(r->want + 1);
            r->have = 0;
        }
        size_t k = r->want - r->have < len ? r->want - r->have : len;
        memcpy(r->msg + r->have, p, k);
        r->have += k;
        p += k;
        len -= k;
        if (r->have == r->want && s_deliver(r, err) < 0)
            return -1;
    }
    return 0;
}

int
e2b_envreader_finish(e2b_envreader_t *r, err_t *err)
{
    if (r->failed)
        return s_fail(r, err);
    if (r->nhead == 0)
        return 0;
    if (r->nhead < 5)
        err_set(&r->why, ERR_USAGE,
                "the stream ended inside message %zu's header (%zu of 5 "
                "bytes)",
                r->count + 1, r->nhead);
    else
        err_set(&r->why, ERR_USAGE,
                "the stream ended inside message %zu (%zu of %zu bytes)",
                r->count + 1, r->have, r->want);
    return s_fail(r, err);
}
