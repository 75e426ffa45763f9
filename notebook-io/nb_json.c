/*
 * nb_json writing: notebooks byte for byte as nbformat writes them (sorted
 * keys, one-space indent, Python's float repr). nb_json_load.c reads them.
 */
#include "notebook-io/nb_json.h"

#include "common/xalloc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One member of an object, for sorting. */
struct s_member {
    const char *key; /* borrowed from the object; NUL-free (jansson) */
    json_t *value;   /* borrowed */
};

static int
s_member_cmp(const void *a, const void *b)
{
    /* Python sorts str keys by code point; for valid UTF-8 that is the
     * unsigned byte order strcmp gives. */
    return strcmp(((const struct s_member *)a)->key,
                  ((const struct s_member *)b)->key);
}

static int
s_newline(buf_t *out, int depth)
{
    /* The newline and up to 32 spaces in one append (most lines). */
    static const char spaces[] = "\n                                ";
    int n = depth < 32 ? depth : 32;
    if (buf_append(out, spaces, (size_t)n + 1))
        return -1;
    for (depth -= n; depth > 0; depth -= n) {
        n = depth < 32 ? depth : 32;
        if (buf_append(out, spaces + 1, (size_t)n))
            return -1;
    }
    return 0;
}

int
nb_json_dump_string(buf_t *out, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t start = 0;
    if (buf_append(out, "\"", 1))
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = u[i];
        char esc[7];
        size_t n = 2;
        if (c == 0xED && i + 2 < len && (u[i + 1] & 0xE0) == 0xA0) {
            /* A lone surrogate kept from the input: its escape again. */
            unsigned cp = (unsigned)(c & 0x0F) << 12 |
                          (unsigned)(u[i + 1] & 0x3F) << 6 | (u[i + 2] & 0x3F);
            snprintf(esc, sizeof esc, "\\u%04x", cp);
            if (buf_append(out, s + start, i - start) ||
                buf_append(out, esc, 6))
                return -1;
            i += 2;
            start = i + 1;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        esc[0] = '\\';
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (buf_append(out, s + start, i - start) || buf_append(out, esc, n))
            return -1;
        start = i + 1;
    }
    if (buf_append(out, s + start, len - start) || buf_append(out, "\"", 1))
        return -1;
    return 0;
}

size_t
nb_json_line_end(const char *s, size_t len, size_t pos)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = pos; i < len; i++) {
        unsigned char c = u[i];
        if (c >= 0x20 && c != 0xc2 && c != 0xe2)
            continue;
        if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d ||
            c == 0x1e)
            return i + 1;
        if (c == '\r')
            return (i + 1 < len && u[i + 1] == '\n') ? i + 2 : i + 1;
        if (c == 0xc2 && i + 1 < len && u[i + 1] == 0x85)
            return i + 2; /* U+0085 NEXT LINE */
        if (c == 0xe2 && i + 2 < len && u[i + 1] == 0x80 &&
            (u[i + 2] == 0xa8 || u[i + 2] == 0xa9))
            return i + 3; /* U+2028, U+2029 */
    }
    return len;
}

static int
s_dump_lines(buf_t *out, const char *s, size_t len, int depth)
{
    if (len == 0)
        return buf_append(out, "[]", 2);
    if (buf_append(out, "[", 1))
        return -1;
    for (size_t pos = 0; pos < len;) {
        size_t end = nb_json_line_end(s, len, pos);
        if ((pos > 0 && buf_append(out, ",", 1)) || s_newline(out, depth + 1) ||
            nb_json_dump_string(out, s + pos, end - pos))
            return -1;
        pos = end;
    }
    if (s_newline(out, depth) || buf_append(out, "]", 1))
        return -1;
    return 0;
}

void
nb_json_repr_float(double d, char out[NB_JSON_FLOAT_SIZE])
{
    char tmp[48], digits[24];
    size_t nd = 0, o = 0;
    int exp10, decpt;

    if (isnan(d)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(d)) {
        strcpy(out, d > 0 ? "Infinity" : "-Infinity");
        return;
    }
    if (d == 0) {
        strcpy(out, signbit(d) ? "-0.0" : "0.0");
        return;
    }
    /* Shortest digit string that reads back as d: the correctly rounded
     * p-digit decimal for the smallest p that round-trips (what Python's
     * repr yields in all but contrived half-way cases). */
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    const char *e = strchr(tmp, 'e');
    for (const char *c = tmp; c < e; c++)
        if (*c >= '0' && *c <= '9')
            digits[nd++] = *c;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    exp10 = atoi(e + 1);
    decpt = exp10 + 1; /* d = 0.DIGITS * 10^decpt */

    if (d < 0)
        out[o++] = '-';
    if (decpt > 16 || decpt <= -4) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        snprintf(out + o, NB_JSON_FLOAT_SIZE - o, "e%c%02d",
                 exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[o++] = '0';
        memcpy(out + o, digits, nd);
        o += nd;
    } else if ((size_t)decpt >= nd) {
        memcpy(out + o, digits, nd);
        o += nd;
        for (size_t i = nd; i < (size_t)decpt; i++)
            out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
    } else {
        memcpy(out + o, digits, (size_t)decpt);
        o += (size_t)decpt;
        out[o++] = '.';
        memcpy(out + o, digits + decpt, nd - (size_t)decpt);
        o += nd - (size_t)decpt;
    }
    out[o] = '\0';
}

static int s_dump(buf_t *out, const json_t *v, int depth, int role,
                  nb_json_role_fn fn);

static int
s_dump_array(buf_t *out, const json_t *v, int depth, int role,
             nb_json_role_fn fn)
{
    size_t n = json_array_size(v);
    if (n == 0)
        return buf_append(out, "[]", 2);
    if (buf_append(out, "[", 1))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *child = json_array_get(v, i);
        int crole = role > 0 ? fn(role, v, NULL, child) : NB_JSON_PLAIN;
        if (crole == NB_JSON_SKIP)
            crole = NB_JSON_PLAIN; /* skipping is for object members */
        if ((i > 0 && buf_append(out, ",", 1)) || s_newline(out, depth + 1) ||
            s_dump(out, child, depth + 1, crole, fn))
            return -1;
    }
    if (s_newline(out, depth) || buf_append(out, "]", 1))
        return -1;
    return 0;
}

static int
s_dump_object(buf_t *out, const json_t *v, int depth, int role,
              nb_json_role_fn fn)
{
    size_t n = json_object_size(v), i = 0, written = 0;
    struct s_member stack[16], *m = stack;
    const char *key;
    json_t *value;
    int rc = -1;

    if (n == 0)
        return buf_append(out, "{}", 2);
    if (n > sizeof stack / sizeof stack[0])
        m = xmalloc(n * sizeof *m);
    json_object_foreach((json_t *)v, key, value)
    {
        m[i].key = key;
        m[i].value = value;
        i++;
    }
    qsort(m, n, sizeof *m, s_member_cmp);
    for (i = 0; i < n; i++) {
        int crole =
            role > 0 ? fn(role, v, m[i].key, m[i].value) : NB_JSON_PLAIN;
        if (crole == NB_JSON_SKIP)
            continue;
        if (buf_append(out, written ? "," : "{", 1) ||
            s_newline(out, depth + 1) ||
            nb_json_dump_string(out, m[i].key, strlen(m[i].key)) ||
            buf_append(out, ": ", 2) ||
            s_dump(out, m[i].value, depth + 1, crole, fn))
            goto out;
        written++;
    }
    if (written == 0)
        rc = buf_append(out, "{}", 2);
    else
        rc = (s_newline(out, depth) || buf_append(out, "}", 1)) ? -1 : 0;
out:
    if (m != stack)
        free(m);
    return rc;
}

static int
s_dump(buf_t *out, const json_t *v, int depth, int role, nb_json_role_fn fn)
{
    char num[NB_JSON_FLOAT_SIZE];

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return s_dump_object(out, v, depth, role, fn);
    case JSON_ARRAY:
        return s_dump_array(out, v, depth, role, fn);
    case JSON_STRING:
        if (nb_json_raw(v))
            return buf_puts(out, nb_json_raw(v));
        if (role == NB_JSON_LINES)
            return s_dump_lines(out, json_string_value(v),
                                json_string_length(v), depth);
        return nb_json_dump_string(out, json_string_value(v),
                                   json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
        return buf_puts(out, num);
    case JSON_REAL:
        nb_json_repr_float(json_real_value(v), num);
        return buf_puts(out, num);
    case JSON_TRUE:
        return buf_append(out, "true", 4);
    case JSON_FALSE:
        return buf_append(out, "false", 5);
    case JSON_NULL:
        return buf_append(out, "null", 4);
    }
    return -1;
}

int
nb_json_dump(buf_t *out, const json_t *v, int depth, int role,
             nb_json_role_fn fn)
{
    if (!v)
        return -1;
    if (!fn && role > 0)
        role = NB_JSON_PLAIN;
    return s_dump(out, v, depth, role, fn);
}

char *
nb_json_dumps(const json_t *v, size_t *len)
{
    buf_t b;
    buf_init(&b, 0);
    nb_json_dump(&b, v, 0, NB_JSON_PLAIN, NULL);
    return buf_detach(&b, len);
}
