#include "agent/llm/ag_sse.h"

#include "common/buf.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

#define S_DEFAULT_MAX (8u * 1024 * 1024)

struct ag_sse {
    ag_sse_event_fn fn; /* event sink */
    void *arg;          /* passed to fn */
    size_t max;         /* cap on one line and on one event's data */
    buf_t line;         /* the current line, without its end of line */
    buf_t data;         /* data buffer: each data value followed by "\n" */
    buf_t type;         /* event type buffer; empty means "message" */
    buf_t id;           /* last event id (persists across events) */
    long retry_ms;      /* last valid retry field, -1 when none */
    size_t events;      /* events dispatched */
    int cr_pending;     /* previous byte was CR: skip one LF that follows */
    int bom_checked;    /* the first bytes were examined for a BOM */
    size_t bom_seen;    /* bytes of a BOM prefix matched so far (0..3) */
    int fields_pending; /* a field line arrived since the last dispatch */
};

ag_sse_t *
ag_sse_new(ag_sse_event_fn fn, void *arg, size_t max_event)
{
    ag_sse_t *p = xcalloc(1, sizeof *p);
    p->fn = fn;
    p->arg = arg;
    p->max = max_event ? max_event : S_DEFAULT_MAX;
    buf_init(&p->line, p->max);
    buf_init(&p->data, p->max + 1);
    buf_init(&p->type, p->max);
    buf_init(&p->id, p->max);
    p->retry_ms = -1;
    return p;
}

void
ag_sse_destroy(ag_sse_t **pp)
{
    if (!pp || !*pp)
        return;
    ag_sse_t *p = *pp;
    buf_release(&p->line);
    buf_release(&p->data);
    buf_release(&p->type);
    buf_release(&p->id);
    free(p);
    *pp = NULL;
}

/* Dispatch on an empty line. Returns 0 or 1 when the sink asked to stop. */
static int
s_dispatch(ag_sse_t *p)
{
    p->fields_pending = 0;
    if (p->data.len == 0) {
        buf_reset(&p->type);
        return 0;
    }
    /* Remove the final "\n" appended after the last data value. */
    p->data.len--;
    p->data.data[p->data.len] = '\0';
    const char *type = p->type.len ? buf_cstr(&p->type) : "message";
    p->events++;
    int rc =
        p->fn(type, buf_cstr(&p->data), p->data.len, buf_cstr(&p->id), p->arg);
    buf_reset(&p->data);
    buf_reset(&p->type);
    return rc ? 1 : 0;
}

static int
s_all_digits(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* Process one complete line. Returns 0, 1 (sink stop) or -1 (too big). */
static int
s_line(ag_sse_t *p)
{
    const char *s = buf_cstr(&p->line);
    size_t n = p->line.len;
    if (n == 0)
        return s_dispatch(p);
    if (s[0] == ':')
        return 0;
    const char *colon = memchr(s, ':', n);
    size_t flen = colon ? (size_t)(colon - s) : n;
    const char *val = colon ? colon + 1 : s + n;
    size_t vlen = (size_t)(s + n - val);
    if (vlen && val[0] == ' ') {
        val++;
        vlen--;
    }
    p->fields_pending = 1;
    if (flen == 5 && memcmp(s, "event", 5) == 0) {
        buf_reset(&p->type);
        if (buf_append(&p->type, val, vlen) < 0)
            return -1;
    } else if (flen == 4 && memcmp(s, "data", 4) == 0) {
        if (buf_append(&p->data, val, vlen) < 0 ||
            buf_append(&p->data, "\n", 1) < 0)
            return -1;
    } else if (flen == 2 && memcmp(s, "id", 2) == 0) {
        if (!memchr(val, '\0', vlen)) {
            buf_reset(&p->id);
            if (buf_append(&p->id, val, vlen) < 0)
                return -1;
        }
    } else if (flen == 5 && memcmp(s, "retry", 5) == 0) {
        if (s_all_digits(val, vlen) && vlen < 10)
            p->retry_ms = strtol(val, NULL, 10);
    }
    return 0;
}

int
ag_sse_feed(ag_sse_t *p, const char *data, size_t len, err_t *err)
{
    static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
    size_t i = 0;
    /* Skip one leading BOM, which may itself be split across chunks. */
    while (!p->bom_checked && i < len) {
        if ((unsigned char)data[i] == bom[p->bom_seen]) {
            p->bom_seen++;
            i++;
            if (p->bom_seen == 3)
                p->bom_checked = 1;
            continue;
        }
        /* Not a BOM after all: the bytes matched so far are line text. */
        p->bom_checked = 1;
        if (p->bom_seen &&
            buf_append(&p->line, (const char *)bom, p->bom_seen) < 0)
            goto too_big;
    }
    while (i < len) {
        char c = data[i];
        if (p->cr_pending) {
            p->cr_pending = 0;
            if (c == '\n') {
                i++;
                continue;
            }
        }
        if (c == '\r' || c == '\n') {
            p->cr_pending = (c == '\r');
            i++;
            int rc = s_line(p);
            buf_reset(&p->line);
            if (rc < 0)
                goto too_big;
            if (rc > 0)
                return -1;
            continue;
        }
        /* Copy the run of ordinary bytes up to the next end of line. */
        size_t j = i;
        while (j < len && data[j] != '\r' && data[j] != '\n')
            j++;
        if (buf_append(&p->line, data + i, j - i) < 0)
            goto too_big;
        i = j;
    }
    return 0;
too_big:
    return err_set(err, ERR_PROVIDER,
                   "event stream: an event is larger than %zu bytes; the "
                   "server's response was rejected",
                   p->max);
}

int
ag_sse_finish(ag_sse_t *p)
{
    int pending = p->line.len > 0 || p->fields_pending ||
                  (!p->bom_checked && p->bom_seen);
    buf_reset(&p->line);
    buf_reset(&p->data);
    buf_reset(&p->type);
    p->fields_pending = 0;
    p->cr_pending = 0;
    return pending;
}

long
ag_sse_retry_ms(const ag_sse_t *p)
{
    return p->retry_ms;
}

size_t
ag_sse_events(const ag_sse_t *p)
{
    return p->events;
}
