#include "common/escape.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most `left` bytes) and its
 * code point, or 0 when the bytes are not valid UTF-8 (overlong forms,
 * surrogates and values past U+10FFFF are not). */
static size_t
s_utf8(const unsigned char *s, size_t left, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if ((c & 0xe0) == 0xc0)
        n = 2, v = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        n = 3, v = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
        n = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n > left)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

static void
s_hex(buf_t *b, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf_printf(b, "\\x%02x", s[i]);
}

void
esc_append(buf_t *b, const char *text, size_t len, int mode)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        /* Copy the longest run of plain printable ASCII at once. */
        while (i < len && s[i] >= 0x20 && s[i] < 0x7f &&
               (s[i] != '\\' || mode == ESC_KEEP_LINES))
            i++;
        if (i > start)
            buf_append(b, s + start, i - start);
        if (i >= len)
            break;
        unsigned char c = s[i];
        if (c < 0x80) {
            if (mode == ESC_KEEP_LINES && (c == '\n' || c == '\t'))
                buf_append(b, &c, 1);
            else if (c == '\\')
                buf_puts(b, "\\\\");
            else if (c == '\n')
                buf_puts(b, "\\n");
            else if (c == '\t')
                buf_puts(b, "\\t");
            else if (c == '\r')
                buf_puts(b, "\\r");
            else if (c == 0x1b)
                buf_puts(b, "\\e");
            else
                s_hex(b, s + i, 1);
            i++;
            continue;
        }
        uint32_t cp = 0;
        size_t n = s_utf8(s + i, len - i, &cp);
        if (n == 0) {
            s_hex(b, s + i, 1); /* invalid: this byte, then resync */
            i++;
            continue;
        }
        if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
            (cp >= 0x2066 && cp <= 0x2069))
            s_hex(b, s + i, n);
        else
            buf_append(b, s + i, n);
        i += n;
    }
}

char *
esc_dup(const char *s, int mode)
{
    buf_t b;
    buf_init(&b, 0);
    esc_append(&b, s ? s : "", s ? strlen(s) : 0, mode);
    return buf_detach(&b, NULL);
}
