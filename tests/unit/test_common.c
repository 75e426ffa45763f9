/* Unit tests for common/: buffers with caps, errors, allocation, clock. */
#include "../tap.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/xalloc.h"

#include <stdlib.h>

int
main(void)
{
    buf_t b;
    buf_init(&b, 8);
    is_int(buf_puts(&b, "abcd"), 0, "a buffer takes bytes under its cap");
    is_int(buf_puts(&b, "efghi"), -1, "a buffer refuses bytes past its cap");
    is_str(buf_cstr(&b), "abcd",
           "a refused append leaves the buffer as it was");
    is_int(buf_puts(&b, "efgh"), 0, "a buffer fills exactly to its cap");
    size_t len;
    char *s = buf_detach(&b, &len);
    is_int(len, 8, "detach hands over the length");
    is_str(s, "abcdefgh", "detach hands over NUL-terminated bytes");
    free(s);
    is_str(buf_cstr(&b), "", "a detached buffer is empty");
    buf_release(&b);

    err_t err;
    err_clear(&err);
    is_int(err_set(&err, ERR_KERNEL, "kernel %s died", "python3"), -1,
           "err_set returns -1 so a failure is one line");
    is_int(err.code, ERR_KERNEL, "err_set records the code");
    err_prefix(&err, "exec");
    is_str(err.text, "exec: kernel python3 died", "err_prefix adds context");
    is_int(err_set(NULL, ERR_IO, "ignored"), -1, "a NULL err is allowed");

    char *p = xasprintf("%d-%s", 7, "x");
    is_str(p, "7-x", "xasprintf formats into a new string");
    free(p);

    char ts[40];
    clock_iso8601_now(ts, sizeof ts);
    ok(strlen(ts) == 27 && ts[26] == 'Z' && ts[19] == '.',
       "timestamps carry microseconds and a UTC zone (%s)", ts);
    int64_t a = clock_mono_us(), c = clock_mono_us();
    ok(c >= a, "the monotonic clock does not go backwards");
    return done_testing();
}
