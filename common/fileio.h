/*
 * fileio: writing files so that readers never see half of one.
 */
#ifndef COMMON_FILEIO_H
#define COMMON_FILEIO_H

#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A small regular file's bytes (new buffer, NUL-terminated after `*len`),
 * refusing more than `max` bytes (EFBIG), what is not a regular file
 * (EINVAL) and, with `nofollow`, a symbolic link. 0 or -1 with errno. */
int file_read_small(const char *path, size_t max, bool nofollow, char **data,
                    size_t *len);

/* write(2) all of `len` bytes, retrying on EINTR and short writes.
 * 0, or -1 with errno set. */
int file_write_all(int fd, const void *data, size_t len);

/* Replace `name` in directory `dirfd` with `data` atomically: a new
 * temporary file (O_EXCL, O_NOFOLLOW) in the same directory, fchmod to
 * `mode` (so the umask does not matter), fsync, rename over `name`.
 * fsync the directory (the rename survives a crash). Readers see the
 * old file or the new one, never a mix; on failure the
 * temporary file is removed and `name` is untouched. `what` names the
 * target in messages (ERR_IO: "cannot write WHAT: reason"). */
int file_write_atomic_at(int dirfd, const char *name, const void *data,
                         size_t len, mode_t mode, const char *what, err_t *err);
/* The same for a path (relative to the working directory or absolute). */
int file_write_atomic(const char *path, const void *data, size_t len,
                      mode_t mode, err_t *err);

/* Outputs a user names (-o, --record, ...) are regular files: a write
 * replaces a regular file or makes a new one, and refuses anything else
 * rather than turn a device, a FIFO, a socket, a directory or a symbolic
 * link into a regular file. file_write_atomic_at checks again just before
 * its rename, so what is there when the write ends is what was checked. */

/* "a symbolic link", "a FIFO", "a character device", ... for st_mode
 * (a static string). */
const char *file_kind(mode_t mode);

/* May an output go to `path`? 0 when nothing is there or a regular file
 * is; else -1 with ERR_USAGE: "FLAG PATH is a FIFO, not a regular file;
 * refusing to replace it: choose a new path or a regular file". `flag`
 * ("-o", "--record") starts the message; NULL for none. */
int file_check_output(const char *path, const char *flag, err_t *err);

/* Open `path` for writing from its start, as file_check_output allows: a
 * new file (mode `mode`, less the umask) or an existing regular file,
 * truncated; never through a symbolic link (O_NOFOLLOW), and a FIFO or
 * device is refused after an open that cannot block (O_NONBLOCK, fstat
 * S_ISREG) before a byte is written. A blocking fd, or -1 with err
 * (ERR_USAGE for what is there, ERR_IO otherwise). */
int file_open_output(const char *path, const char *flag, mode_t mode,
                     err_t *err);

#endif
