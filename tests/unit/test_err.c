/* Unit tests for common/err: the contract (the last error wins, err_prefix
 * keeps the code), err_errno (strerror appended, errno kept) and err_errnum
 * (a kept or negated error number). */
#include "../tap.h"

#include "common/err.h"

#include <errno.h>
#include <string.h>

int
main(void)
{
    err_t err = {0};
    is_int(err.code, ERR_OK, "a record starts empty with = {0}");

    errno = ENOENT;
    is_int(err_errno(&err, ERR_IO, "cannot open %s", "/nope"), -1,
           "err_errno returns -1 so a failure is one line");
    is_int(err.code, ERR_IO, "err_errno records the code");
    is_str(err.text, "cannot open /nope: No such file or directory",
           "err_errno appends ': ' and strerror(errno)");
    is_int(errno, ENOENT, "err_errno leaves errno as it was");

    errno = EACCES;
    is_int(err_errno(NULL, ERR_IO, "ignored"), -1, "a NULL err is allowed");
    is_int(errno, EACCES, "... and errno is kept then too");

    errno = EINTR;
    is_int(err_errnum(&err, ERR_SANDBOX, EAGAIN, "thread %d", 2), -1,
           "err_errnum returns -1");
    is_str(err.text, "thread 2: Resource temporarily unavailable",
           "err_errnum appends the error number it is given, not errno");
    is_int(err.code, ERR_SANDBOX, "... records the code");
    is_int(errno, EINTR, "... and leaves errno as it was");

    char long_name[2000];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    errno = EPERM;
    err_errno(&err, ERR_IO, "cannot write %s", long_name);
    is_int(strlen(err.text), sizeof err.text - 1,
           "a long message is cut at the record's size, still terminated");

    err_set(&err, ERR_KERNEL, "inner");
    err_set(&err, ERR_TIMEOUT, "outer");
    is_str(err.text, "outer", "the last err_set wins");
    is_int(err.code, ERR_TIMEOUT, "... code included");
    err_prefix(&err, "exec");
    is_str(err.text, "exec: outer", "err_prefix adds context in front");
    is_int(err.code, ERR_TIMEOUT, "... and keeps the code");
    err_clear(&err);
    is_int(err.code, ERR_OK, "err_clear empties the code");
    is_str(err.text, "", "... and the text");
    done_testing();
}
