/*
 * fileio: writing files so that readers never see half of one.
 */
#ifndef COMMON_FILEIO_H
#define COMMON_FILEIO_H

#include "common/err.h"

#include <stddef.h>
#include <sys/types.h>

/* write(2) all of `len` bytes, retrying on EINTR and short writes.
 * 0, or -1 with errno set. */
int file_write_all(int fd, const void *data, size_t len);

/* Replace `name` in directory `dirfd` with `data` atomically: a new
 * temporary file (O_EXCL, O_NOFOLLOW) in the same directory, fchmod to
 * `mode` (so the umask does not matter), fsync, rename over `name`.
 * Readers see the old file or the new one, never a mix; on failure the
 * temporary file is removed and `name` is untouched. `what` names the
 * target in messages (ERR_IO: "cannot write WHAT: reason"). */
int file_write_atomic_at(int dirfd, const char *name, const void *data,
                         size_t len, mode_t mode, const char *what, err_t *err);
/* The same for a path (relative to the working directory or absolute). */
int file_write_atomic(const char *path, const void *data, size_t len,
                      mode_t mode, err_t *err);

#endif
