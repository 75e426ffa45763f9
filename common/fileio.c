#include "fileio.h"

#include "xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int
file_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A temporary name next to `name` that nobody else uses: O_EXCL retries on
 * the rare collision. */
static int
s_open_temp(int dirfd, const char *name, char *tmp, size_t size)
{
    for (int attempt = 0; attempt < 32; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(tmp, size, ".%s.tmp-%ld-%lx", name, (long)getpid(),
                 (unsigned long)(ts.tv_nsec ^ (attempt * 2654435761u)));
        int fd =
            openat(dirfd, tmp,
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int
file_write_atomic_at(int dirfd, const char *name, const void *data, size_t len,
                     mode_t mode, const char *what, err_t *err)
{
    char tmp[512];
    int fd = s_open_temp(dirfd, name, tmp, sizeof tmp);
    if (fd < 0)
        return err_errno(err, ERR_IO,
                         "cannot write %s: cannot create a temporary file "
                         "next to it",
                         what);
    int bad = fchmod(fd, mode) != 0 || file_write_all(fd, data, len) != 0 ||
              fsync(fd) != 0;
    int saved = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (!bad && renameat(dirfd, tmp, dirfd, name) != 0) {
        bad = 1;
        saved = errno;
    }
    if (bad) {
        unlinkat(dirfd, tmp, 0);
        return err_set(err, ERR_IO, "cannot write %s: %s", what,
                       strerror(saved));
    }
    return 0;
}

int
file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                  err_t *err)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup(".");
    if (!*dir) {
        free(dir);
        dir = xstrdup("/");
    }
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (dirfd < 0)
        return err_errno(err, ERR_IO, "cannot write %s", path);
    int rc = file_write_atomic_at(dirfd, slash ? slash + 1 : path, data, len,
                                  mode, path, err);
    close(dirfd);
    return rc;
}
