/*
 * utf8: RFC 3629 decoding and character-boundary cuts.
 */
#include "common/utf8.h"

#include <assert.h>

long
utf8_decode(const unsigned char *s, size_t len, size_t *i)
{
    assert(*i < len);
    unsigned char c = s[*i];
    size_t n;
    long cp;

    if (c < 0x80) {
        (*i)++;
        return c;
    }
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        goto bad;
    if (*i + n > len)
        goto bad;
    for (size_t k = 1; k < n; k++) {
        if ((s[*i + k] & 0xc0) != 0x80)
            goto bad;
        cp = (cp << 6) | (s[*i + k] & 0x3f);
    }
    /* overlong forms, surrogates, beyond U+10FFFF */
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        goto bad;
    *i += n;
    return cp;
bad:
    (*i)++;
    return -1 - (long)c;
}

size_t
utf8_seq_len(const unsigned char *u, size_t n)
{
    size_t i = 0;
    return utf8_decode(u, n, &i) >= 0 ? i : 0;
}

size_t
utf8_char_start(const char *s, size_t i)
{
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
        i--;
    return i;
}

size_t
utf8_cut(const char *s, size_t len, size_t max)
{
    return len <= max ? len : utf8_char_start(s, max);
}
