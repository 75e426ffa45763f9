#include "check.h"

#include <stdio.h>
#include <stdlib.h>

/* Defined in every build, so a test can tell which one it is in; only
 * JA_NEVER_ABORTS builds call it. */
void check_failed(const char *file, int line, const char *what)
    __attribute__((noreturn));

void
check_failed(const char *file, int line, const char *what)
{
    fprintf(stderr, "jupyter-agent: %s:%d: %s: an invariant broke\n", file,
            line, what);
    abort();
}
