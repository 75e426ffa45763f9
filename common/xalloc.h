/*
 * xalloc: allocation that never returns NULL.
 *
 * Out of memory in the agent process is not recoverable in any useful way
 * (we would lose the session notebook anyway), so these abort with a message.
 * Every pointer returned is owned by the caller and released with free().
 */
#ifndef COMMON_XALLOC_H
#define COMMON_XALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new string; caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));

#endif
