#include "buf.h"

#include "xalloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
buf_init(buf_t *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    b->max = max;
}

void
buf_release(buf_t *b)
{
    free(b->data);
    buf_init(b, b->max);
}

void
buf_reset(buf_t *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

/* The invariants stated in buf.h. */
static void
s_check(const buf_t *b)
{
    assert(b->data ? b->len < b->alloc && b->data[b->len] == '\0'
                   : b->len == 0 && b->alloc == 0);
    assert(b->max == 0 || b->len <= b->max);
    (void)b;
}

static void
s_reserve(buf_t *b, size_t need)
{
    if (need < b->alloc)
        return;
    size_t alloc = b->alloc ? b->alloc : 64;
    while (alloc <= need)
        alloc *= 2;
    b->data = xrealloc(b->data, alloc);
    b->alloc = alloc;
}

int
buf_append(buf_t *b, const void *data, size_t len)
{
    s_check(b);
    if (b->max && (len > b->max || b->len > b->max - len))
        return -1;
    s_reserve(b, b->len + len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    s_check(b);
    return 0;
}

int
buf_puts(buf_t *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int
buf_printf(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    int rc = buf_puts(b, s);
    free(s);
    return rc;
}

char *
buf_detach(buf_t *b, size_t *len)
{
    char *p = b->data ? b->data : xstrdup("");
    if (len)
        *len = b->len;
    buf_init(b, b->max);
    return p;
}

const char *
buf_cstr(const buf_t *b)
{
    return b->data ? b->data : "";
}
