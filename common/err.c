#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int
err_vset(err_t *err, int code, const char *fmt, va_list ap)
{
    if (!err)
        return -1;
    err->code = code;
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    return -1;
}

int
err_set(err_t *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(err, code, fmt, ap);
    va_end(ap);
    return -1;
}

/* err_vset() with ": strerror(errnum)" appended; errno left as it was. */
static int
s_verrnum(err_t *err, int code, int errnum, const char *fmt, va_list ap)
{
    int saved = errno;
    if (!err)
        return -1;
    err_vset(err, code, fmt, ap);
    size_t len = strnlen(err->text, sizeof err->text - 1);
    snprintf(err->text + len, sizeof err->text - len, ": %s", strerror(errnum));
    errno = saved;
    return -1;
}

int
err_errno(err_t *err, int code, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    s_verrnum(err, code, saved, fmt, ap);
    va_end(ap);
    return -1;
}

int
err_errnum(err_t *err, int code, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_verrnum(err, code, errnum, fmt, ap);
    va_end(ap);
    return -1;
}

int
err_prefix(err_t *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t plen = strlen(prefix);
    size_t cap = sizeof err->text;
    if (plen + 2 >= cap)
        plen = cap - 3;
    size_t tlen = strnlen(err->text, cap - 1);
    if (plen + 2 + tlen >= cap)
        tlen = cap - 1 - plen - 2;
    memmove(err->text + plen + 2, err->text, tlen);
    memcpy(err->text, prefix, plen);
    err->text[plen] = ':';
    err->text[plen + 1] = ' ';
    err->text[plen + 2 + tlen] = '\0';
    return -1;
}

void
err_clear(err_t *err)
{
    if (!err)
        return;
    err->code = ERR_OK;
    err->text[0] = '\0';
}
