#include "agent/loop/ag_markdown.h"

#include "common/buf.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

/* Length of the run of `c` starting at p. */
static size_t
s_run(const char *p, char c)
{
    size_t n = 0;
    while (p[n] == c)
        n++;
    return n;
}

/* If the line at p opens or closes a fence (up to 3 spaces, then 3+ ` or
 * ~), return the fence character and its length in *len; else 0. */
static char
s_fence(const char *p, size_t *len)
{
    int indent = 0;
    while (*p == ' ' && indent < 4) {
        p++;
        indent++;
    }
    if (indent > 3 || (*p != '`' && *p != '~'))
        return 0;
    *len = s_run(p, *p);
    return *len >= 3 ? *p : 0;
}

char *
ag_markdown_escape_currency(const char *md)
{
    buf_t out;
    buf_init(&out, 0);
    char fence = 0;       /* inside a fenced block opened by this char */
    size_t fence_len = 0; /* ... with this many of them */
    const char *p = md;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        size_t flen;
        char f = s_fence(p, &flen);
        if (fence) {
            if (f == fence && flen >= fence_len)
                fence = 0;
            buf_append(&out, p, n);
            p += n;
            continue;
        }
        if (f) {
            fence = f;
            fence_len = flen;
            buf_append(&out, p, n);
            p += n;
            continue;
        }
        /* An ordinary line: skip code spans, escape currency dollars. */
        for (size_t i = 0; i < n;) {
            if (p[i] == '`') {
                size_t ticks = s_run(p + i, '`');
                const char *close = NULL;
                for (size_t j = i + ticks; j < n; j++)
                    if (p[j] == '`' && s_run(p + j, '`') == ticks) {
                        close = p + j;
                        break;
                    } else if (p[j] == '`') {
                        j += s_run(p + j, '`') - 1;
                    }
                size_t end = close ? (size_t)(close - p) + ticks : i + ticks;
                buf_append(&out, p + i, end - i);
                i = end;
                continue;
            }
            if (p[i] == '\\' && i + 1 < n) {
                buf_append(&out, p + i, 2);
                i += 2;
                continue;
            }
            if (p[i] == '$' && i + 1 < n && isdigit((unsigned char)p[i + 1]))
                buf_puts(&out, "\\");
            buf_append(&out, p + i, 1);
            i++;
        }
        p += n;
    }
    return buf_detach(&out, NULL);
}
