/*
 * buf: a growable byte buffer with a hard size cap.
 *
 * Invariants: data is NULL or points to `alloc` bytes; len < alloc whenever
 * data != NULL, and data[len] == '\0' so text can be used as a C string.
 * len never exceeds max (0 = no cap). Callers embed a buf_t and pair
 * buf_init() with buf_release().
 */
#ifndef COMMON_BUF_H
#define COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct buf {
    char *data;   /* owned; NUL-terminated when non-NULL */
    size_t len;   /* bytes in use, excluding the terminating NUL */
    size_t alloc; /* bytes allocated */
    size_t max;   /* cap on len; 0 means unlimited */
} buf_t;

void buf_init(buf_t *b, size_t max);
void buf_release(buf_t *b);
void buf_reset(buf_t *b);
/* Append; returns 0, or -1 (appending nothing) if the cap would be passed. */
int buf_append(buf_t *b, const void *data, size_t len);
int buf_puts(buf_t *b, const char *s);
int buf_printf(buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hand the contents to the caller (never NULL) and reset the buffer. */
char *buf_detach(buf_t *b, size_t *len);
/* Return a NUL-terminated view, "" when empty. Borrowed. */
const char *buf_cstr(const buf_t *b);

#endif
