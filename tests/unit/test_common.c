/* Unit tests for common/: buffers with caps, errors, allocation, clock,
 * string lists, UTF-8, Jupyter paths. */
#include "../tap.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/jpaths.h"
#include "common/strv.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

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
    char **v = NULL;
    size_t n = 0;
    strv_push(&v, &n, xstrdup("a"));
    strv_push(&v, &n, xstrdup("b"));
    ok(n == 2 && strv_len(v) == 2 && v[2] == NULL,
       "a string list stays NULL-terminated as it grows");
    strv_free(v);
    strv_free(NULL);
    ok(strv_len(NULL) == 0, "a NULL string list is empty and frees");

    const char *e = "h\xc3\xa9llo"; /* "héllo": é is two bytes */
    is_int(utf8_cut(e, 6, 2), 1, "a cut never ends inside a character");
    is_int(utf8_cut(e, 6, 3), 3, "a cut after a whole character keeps it");
    is_int(utf8_cut(e, 6, 10), 6, "a text under the limit is kept whole");
    size_t i = 1;
    is_int(utf8_decode((const unsigned char *)e, 6, &i), 0xe9,
           "a two-byte character decodes to its code point");
    is_int(i, 3, "...and decoding moves past it");
    const unsigned char over[] = {0xc0, 0xaf}, sur[] = {0xed, 0xa0, 0x80};
    is_int(utf8_seq_len(over, 2), 0, "an overlong form is invalid");
    is_int(utf8_seq_len(sur, 3), 0, "an encoded surrogate is invalid");
    i = 0;
    is_int(utf8_decode(over, 2, &i), -1 - 0xc0,
           "an invalid byte decodes as -1 - byte, one byte at a time");

    /* Jupyter paths follow jupyter_core. */
    unsetenv("JUPYTER_RUNTIME_DIR");
    unsetenv("XDG_DATA_HOME");
    setenv("JUPYTER_DATA_DIR", "/j/data", 1);
    char *d = jpaths_data_dir(), *r = jpaths_runtime_dir();
    is_str(d, "/j/data", "JUPYTER_DATA_DIR names the Jupyter data dir");
    is_str(r, "/j/data/runtime", "the runtime dir is inside the data dir");
    free(d);
    free(r);
    setenv("JUPYTER_DATA_DIR", "", 1);
    setenv("XDG_DATA_HOME", "/x", 1);
    setenv("JUPYTER_RUNTIME_DIR", "/rt", 1);
    d = jpaths_data_dir();
    r = jpaths_runtime_dir();
    is_str(d, "/x/jupyter", "an empty JUPYTER_DATA_DIR falls to XDG_DATA_HOME");
    is_str(r, "/rt", "JUPYTER_RUNTIME_DIR names the runtime dir");
    free(d);
    free(r);
    unsetenv("XDG_DATA_HOME");
    unsetenv("JUPYTER_RUNTIME_DIR");
    setenv("HOME", "/h", 1);
    d = jpaths_data_dir();
    is_str(d, "/h/.local/share/jupyter", "else it is under $HOME");
    free(d);
    setenv("HOME", "", 1);
    d = jpaths_data_dir();
    ok(!d || (strncmp(d, "/tmp", 4) != 0 && d[0] == '/' && d[1] != '.'),
       "without $HOME it is the password database's home, never /tmp or "
       "/: %s",
       d ? d : "(none)");
    free(d);

    return done_testing();
}
