#include "fileio.h"

#include "xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
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
    struct stat st;
    if (!bad && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISREG(st.st_mode)) {
        unlinkat(dirfd, tmp, 0);
        return err_set(err, ERR_USAGE,
                       "%s is %s, not a regular file; refusing to replace "
                       "it: choose a new path or a regular file",
                       what, file_kind(st.st_mode));
    }
    if (!bad && renameat(dirfd, tmp, dirfd, name) != 0) {
        bad = 1;
        saved = errno;
    }
    if (bad) {
        unlinkat(dirfd, tmp, 0);
        return err_errnum(err, ERR_IO, saved, "cannot write %s", what);
    }
    /* The rename itself is durable only once the directory is: without
     * this a crash soon after can bring back the old file (or none).
     * EINVAL: a file system that cannot sync directories. */
    if (fsync(dirfd) != 0 && errno != EINVAL && errno != EROFS)
        return err_errno(err, ERR_IO,
                         "cannot write %s: the directory holding it could "
                         "not be synced",
                         what);
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

const char *
file_kind(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "a regular file";
    case S_IFDIR:
        return "a directory";
    case S_IFLNK:
        return "a symbolic link";
    case S_IFIFO:
        return "a FIFO";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    case S_IFSOCK:
        return "a socket";
    default:
        return "not a regular file";
    }
}

static int
s_refuse(const char *path, const char *flag, mode_t mode, err_t *err)
{
    return err_set(err, ERR_USAGE,
                   "%s%s%s is %s, not a regular file; refusing to replace "
                   "it: choose a new path or a regular file",
                   flag ? flag : "", flag ? " " : "", path, file_kind(mode));
}

int
file_check_output(const char *path, const char *flag, err_t *err)
{
    struct stat st;
    if (!path || !*path)
        return err_set(err, ERR_USAGE, "%s%sneeds a file name",
                       flag ? flag : "", flag ? " " : "");
    if (lstat(path, &st) != 0)
        return 0; /* nothing there: the write makes a new file */
    return S_ISREG(st.st_mode) ? 0 : s_refuse(path, flag, st.st_mode, err);
}

int
file_open_output(const char *path, const char *flag, mode_t mode, err_t *err)
{
    if (file_check_output(path, flag, err))
        return -1;
    int fd = open(path,
                  O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
                      O_CLOEXEC,
                  mode);
    if (fd < 0) {
        struct stat st;
        if (errno == ELOOP && lstat(path, &st) == 0)
            return s_refuse(path, flag, st.st_mode, err);
        return err_errno(err, ERR_IO, "%s%scannot write %s", flag ? flag : "",
                         flag ? ": " : "", path);
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
        st.st_mode = 0;
    if (!S_ISREG(st.st_mode)) {
        int rc = s_refuse(path, flag, st.st_mode, err);
        close(fd);
        return rc;
    }
    int fl = fcntl(fd, F_GETFL);
    if (ftruncate(fd, 0) != 0 || fl < 0 ||
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int rc = err_errno(err, ERR_IO, "%s%scannot write %s", flag ? flag : "",
                           flag ? ": " : "", path);
        close(fd);
        return rc;
    }
    return fd;
}

int
file_read_small(const char *path, size_t max, bool nofollow, char **data,
                size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK |
                            (nofollow ? O_NOFOLLOW : 0));
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > max) {
        int e = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
        close(fd);
        errno = e;
        return -1;
    }
    char *buf = xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return 0;
}
