/*
 * size: byte sizes with binary units.
 */
#include "common/size.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

int
size_parse(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -1; /* also refuses "", "-1", " 1", "G" */
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || !(v >= 0))
        return -1;
    double mult = 1;
    const char *u = end;
    switch (toupper((unsigned char)*u)) {
    case '\0':
        break;
    case 'B':
        u++;
        break;
    case 'K':
        mult = 1024.0;
        break;
    case 'M':
        mult = 1024.0 * 1024;
        break;
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        break;
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        break;
    default:
        return -1;
    }
    if (mult > 1) { /* K, KB, KiB, Ki: all binary */
        u++;
        if (*u == 'i' || *u == 'I')
            u++;
        if (*u == 'b' || *u == 'B')
            u++;
    }
    if (*u != '\0')
        return -1;
    double bytes = v * mult;
    if (bytes >= 18446744073709551615.0)
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}
