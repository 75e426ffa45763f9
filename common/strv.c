/*
 * strv: NULL-terminated string arrays.
 */
#include "common/strv.h"

#include "common/xalloc.h"

#include <assert.h>
#include <stdlib.h>

void
strv_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

void
strv_push(char ***v, size_t *n, char *s)
{
    assert(s != NULL);          /* a NULL would end the list early */
    assert(*n == strv_len(*v)); /* the count matches the list */
    *v = xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = s;
    (*v)[*n] = NULL;
}

size_t
strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}
