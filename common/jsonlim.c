/*
 * jsonlim: see jsonlim.h.
 */
#include "common/jsonlim.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static size_t
s_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

jsonlim_scan_t
jsonlim_scan(const char *text, size_t len)
{
    jsonlim_scan_t s = {0, 0, 0};
    int depth = 0;
    /* A scalar starts a value only after a separator (or at the start):
     * `123` is one value, not three. */
    bool after_sep = true;
    size_t cost = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        switch (c) {
        case '"': {
            size_t start = ++i;
            while (i < len && text[i] != '"')
                i += text[i] == '\\' ? 2 : 1;
            s.values++;
            cost = s_add(cost, JSONLIM_COST_VALUE + JSONLIM_COST_STRING +
                                   (i < len ? i - start : len - start));
            after_sep = false;
            break;
        }
        case '[':
        case '{':
            if (++depth > s.depth)
                s.depth = depth;
            s.values++;
            cost = s_add(cost,
                         JSONLIM_COST_VALUE + (c == '[' ? JSONLIM_COST_ARRAY
                                                        : JSONLIM_COST_OBJECT));
            after_sep = true;
            break;
        case ']':
        case '}':
            if (--depth < 0) {
                s.depth = -1;
                s.cost = cost;
                return s;
            }
            after_sep = false;
            break;
        case ',':
        case ':':
            after_sep = true;
            break;
        case ' ':
        case '\t':
        case '\n':
        case '\r':
            break;
        default:
            if (after_sep) {
                s.values++;
                cost = s_add(cost, JSONLIM_COST_VALUE);
            }
            after_sep = false;
            break;
        }
    }
    if (depth != 0)
        s.depth = -1;
    s.cost = cost;
    return s;
}

static double
s_mib(size_t n)
{
    return (double)n / (1024.0 * 1024.0);
}

bool
jsonlim_fits(const jsonlim_scan_t *s, size_t len, const jsonlim_t *lim,
             char *why, size_t size)
{
    int max_depth =
        lim && lim->max_depth ? lim->max_depth : JSONLIM_DEFAULT_DEPTH;
    size_t allowance =
        lim && lim->allowance ? lim->allowance : JSONLIM_DEFAULT_ALLOWANCE;
    size_t budget = s_add(len, allowance);
    if (s->depth < 0) {
        if (why && size)
            snprintf(why, size, "JSON whose brackets do not balance");
        return false;
    }
    if (s->depth > max_depth) {
        if (why && size)
            snprintf(why, size, "JSON nested deeper than %d levels", max_depth);
        return false;
    }
    if (s->cost > budget) {
        if (why && size)
            snprintf(why, size,
                     "JSON of %zu values in %zu bytes (would cost %.1f MiB "
                     "to parse, %.1f MiB allowed)",
                     s->values, len, s_mib(s->cost), s_mib(budget));
        return false;
    }
    return true;
}

json_t *
jsonlim_loadb(const char *text, size_t len, size_t flags, const jsonlim_t *lim,
              json_error_t *err)
{
    jsonlim_scan_t s = jsonlim_scan(text, len);
    /* the last byte of err->text holds jansson's error code */
    char why[JSON_ERROR_TEXT_LENGTH - 1];
    if (!jsonlim_fits(&s, len, lim, why, sizeof why)) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->line = -1;
            err->column = -1;
            memcpy(err->text, why, sizeof why);
        }
        return NULL;
    }
    return json_loadb(text, len, flags, err);
}
