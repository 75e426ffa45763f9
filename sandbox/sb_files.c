/*
 * sb_files: openat2-based workspace access.
 */
#include "sandbox/sb_files.h"
#include "sandbox/sb_files_impl.h"

#include "common/buf.h"
#include "common/escape.h"
#include "common/fileio.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int
sb_files_check_name(const char *name, err_t *err)
{
    if (!name || !*name)
        return err_set(err, ERR_USAGE, "file name is empty");
    if (strlen(name) > 255)
        return err_set(err, ERR_USAGE, "file name '%.40s...' is too long",
                       name);
    if (name[0] == '.')
        return err_set(err, ERR_USAGE,
                       "file name '%s' starts with '.'; choose a plain name",
                       name);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if (*c == '/')
            return err_set(err, ERR_USAGE,
                           "file name '%s' contains '/'; give a plain name "
                           "(files land in /mnt/data)",
                           name);
        if (*c < 0x20 || *c == 0x7f)
            return err_set(err, ERR_USAGE,
                           "file name contains a control character");
    }
    return 0;
}

int
sb_files_check_relpath(const char *relpath, err_t *err)
{
    if (!relpath || !*relpath)
        return err_set(err, ERR_USAGE, "workspace path is empty");
    if (relpath[0] == '/')
        return err_set(err, ERR_USAGE,
                       "workspace path '%s' is absolute; give it relative to "
                       "/mnt/data",
                       relpath);
    if (strlen(relpath) >= 4096)
        return err_set(err, ERR_USAGE, "workspace path is too long");
    const char *c = relpath;
    while (*c) {
        const char *start = c;
        while (*c && *c != '/')
            c++;
        size_t n = (size_t)(c - start);
        if (n == 2 && start[0] == '.' && start[1] == '.')
            return err_set(err, ERR_USAGE,
                           "workspace path '%s' contains '..'; paths must stay "
                           "inside /mnt/data",
                           relpath);
        if (n == 0 || (n == 1 && start[0] == '.' && c - relpath > 1))
            return err_set(err, ERR_USAGE,
                           "workspace path '%s' has an empty or '.' component",
                           relpath);
        if (*c == '/')
            c++;
    }
    return 0;
}

const char *
sb_files_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "directory";
    if (S_ISLNK(m))
        return "symbolic link";
    if (S_ISFIFO(m))
        return "FIFO";
    if (S_ISSOCK(m))
        return "socket";
    if (S_ISCHR(m))
        return "character device";
    if (S_ISBLK(m))
        return "block device";
    return "special file";
}

/* openat2 beneath `dirfd`; returns fd or -errno. */
int
sb_files_open_beneath(int dirfd, const char *rel, int flags)
{
    struct open_how how = {.flags =
                               (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC |
                                          ((flags & O_PATH) ? 0 : O_NOCTTY)),
                           .mode = 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
    return fd < 0 ? -errno : (int)fd;
}

int
sb_files_open_error(err_t *err, const char *rel, int e)
{
    switch (e) {
    case ELOOP:
        return err_set(err, ERR_IO,
                       "refused '%s': it is (or passes through) a symbolic "
                       "link; only regular files come out of /mnt/data",
                       rel);
    case EXDEV:
        return err_set(err, ERR_IO, "refused '%s': it leads outside /mnt/data",
                       rel);
    case ENXIO:
        return err_set(err, ERR_IO, "refused '%s': it is a socket", rel);
    case ENOENT:
        return err_set(err, ERR_IO, "'%s' does not exist in /mnt/data", rel);
    default:
        return err_errnum(err, ERR_IO, e, "cannot open '%s' in /mnt/data", rel);
    }
}

int
sb_files_read(int ws_fd, const char *relpath, size_t max_bytes, char **data,
              size_t *len, err_t *err)
{
    *data = NULL;
    *len = 0;
    if (sb_files_check_relpath(relpath, err) < 0)
        return -1;
    /* Classify through an O_PATH handle first: opening a device or socket
     * for reading would fail with a less helpful error (or have effects). */
    int pfd = sb_files_open_beneath(ws_fd, relpath, O_PATH);
    if (pfd < 0)
        return sb_files_open_error(err, relpath, -pfd);
    struct stat pst;
    int fst = fstat(pfd, &pst);
    close(pfd);
    if (fst == 0 && !S_ISREG(pst.st_mode))
        return err_set(err, ERR_IO,
                       "refused '%s': it is a %s; only regular files come out "
                       "of /mnt/data",
                       relpath, sb_files_kind(pst.st_mode));
    int fd = sb_files_open_beneath(ws_fd, relpath, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return sb_files_open_error(err, relpath, -fd);
    int rc = -1;
    buf_t b;
    buf_init(&b, 0);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        err_errno(err, ERR_IO, "cannot stat '%s'", relpath);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, ERR_IO,
                "refused '%s': it is a %s; only regular files come out of "
                "/mnt/data",
                relpath, sb_files_kind(st.st_mode));
        goto out;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        err_set(err, ERR_IO,
                "refused '%s': %lld bytes is over the %zu-byte cap", relpath,
                (long long)st.st_size, max_bytes);
        goto out;
    }
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_errno(err, ERR_IO, "reading '%s'", relpath);
            goto out;
        }
        if (n == 0)
            break;
        if (b.len + (size_t)n > max_bytes) {
            err_set(err, ERR_IO, "refused '%s': it grew past the %zu-byte cap",
                    relpath, max_bytes);
            goto out;
        }
        buf_append(&b, chunk, (size_t)n);
    }
    *data = buf_detach(&b, len);
    rc = 0;
out:
    buf_release(&b);
    close(fd);
    return rc;
}

int
sb_files_copy_fd(int in, int out, uint64_t max, uint64_t *copied,
                 const char *what, err_t *err)
{
    char chunk[65536];
    for (;;) {
        ssize_t n = read(in, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(err, ERR_IO, "reading %s", what);
        if (n == 0)
            return 0;
        if (*copied + (uint64_t)n > max)
            return err_set(err, ERR_IO, "%s: over the size cap of %llu bytes",
                           what, (unsigned long long)max);
        if (file_write_all(out, chunk, (size_t)n) < 0)
            return err_errno(err, ERR_IO, "writing %s", what);
        *copied += (uint64_t)n;
    }
}

/* The checks every input file passes once open: a regular file (never
 * blocking: the open was O_NONBLOCK) of at most max_bytes, then made
 * blocking. `shown` names it. Returns fd, or -1 + err with fd closed. */
static int
s_input_checks(int fd, const char *shown, uint64_t max_bytes, struct stat *st,
               err_t *err)
{
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        err_set(err, ERR_USAGE, "'%s' is a %s; only regular files can go in",
                shown, sb_files_kind(st->st_mode));
    } else if ((uint64_t)st->st_size > max_bytes) {
        err_set(err, ERR_USAGE,
                "'%s' (%lld bytes) does not fit in the workspace (%llu bytes); "
                "raise --disk",
                shown, (long long)st->st_size, (unsigned long long)max_bytes);
    } else if (fcntl(fd, F_SETFL, 0) < 0) {
        err_errno(err, ERR_IO, "cannot read '%s'", shown);
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

int
sb_files_open_input(const char *host_path, uint64_t max_bytes, struct stat *st,
                    err_t *err)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open(host_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return err_errno(err, ERR_USAGE, "cannot read '%s'", host_path);
    memset(st, 0, sizeof *st);
    return s_input_checks(fd, host_path, max_bytes, st, err);
}

int
sb_files_open_input_at(int dir_fd, const char *relpath, const char *dir_shown,
                       uint64_t max_bytes, struct stat *st, err_t *err)
{
    if (!relpath || !*relpath || relpath[0] == '/' || strstr(relpath, "//"))
        return err_set(err, ERR_USAGE,
                       "'%s' is not a path relative to %s; name a file in "
                       "that directory",
                       relpath ? relpath : "", dir_shown);
    for (const char *c = relpath; *c;) {
        size_t n = strcspn(c, "/");
        if ((n == 2 && c[0] == '.' && c[1] == '.') || (n == 1 && c[0] == '.'))
            return err_set(err, ERR_USAGE,
                           "'%s' has a '.' or '..' component; name a file "
                           "inside %s",
                           relpath, dir_shown);
        c += n + (c[n] == '/');
    }
    int fd = sb_files_open_beneath(dir_fd, relpath, O_RDONLY | O_NONBLOCK);
    if (fd >= 0) {
        memset(st, 0, sizeof *st);
        return s_input_checks(fd, relpath, max_bytes, st, err);
    }
    switch (-fd) {
    case ELOOP:
        return err_set(err, ERR_USAGE,
                       "refused '%s': it is (or passes through) a symbolic "
                       "link; copy the file itself into %s",
                       relpath, dir_shown);
    case EXDEV:
        return err_set(err, ERR_USAGE, "refused '%s': it leads outside %s",
                       relpath, dir_shown);
    case ENXIO:
        return err_set(err, ERR_USAGE,
                       "'%s' is a socket; only regular files can go in",
                       relpath);
    case ENOENT:
        return err_set(err, ERR_USAGE, "there is no '%s' in %s", relpath,
                       dir_shown);
    default:
        return err_errnum(err, ERR_USAGE, -fd, "cannot read '%s' in %s",
                          relpath, dir_shown);
    }
}

int
sb_files_copy_in_fd(int ws_fd, int in, const char *shown, const char *name,
                    uint64_t max_bytes, uid_t owner, gid_t group, err_t *err)
{
    if (sb_files_check_name(name, err) < 0)
        return -1;
    int out = -1, rc = -1;
    int old_uid = -1, old_gid = -1;
    if (owner != (uid_t)-1) {
        old_gid = setfsgid(group);
        old_uid = setfsuid(owner);
    }
    out = openat(ws_fd, name,
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    int e = errno;
    if (owner != (uid_t)-1) {
        setfsuid((uid_t)old_uid);
        setfsgid((gid_t)old_gid);
    }
    if (out < 0) {
        err_errnum(err, ERR_SANDBOX, e, "cannot create /mnt/data/%s", name);
        goto out;
    }
    uint64_t copied = 0;
    char what[600];
    snprintf(what, sizeof what, "'%s'", shown);
    if (sb_files_copy_fd(in, out, max_bytes, &copied, what, err) < 0) {
        /* Never leave half a file under the name. */
        if (owner != (uid_t)-1) {
            old_gid = setfsgid(group);
            old_uid = setfsuid(owner);
        }
        unlinkat(ws_fd, name, 0);
        if (owner != (uid_t)-1) {
            setfsuid((uid_t)old_uid);
            setfsgid((gid_t)old_gid);
        }
        goto out;
    }
    rc = 0;
out:
    if (out >= 0)
        close(out);
    return rc;
}

int
sb_files_copy_in(int ws_fd, const char *host_path, const char *name,
                 uint64_t max_bytes, uid_t owner, gid_t group, err_t *err)
{
    if (sb_files_check_name(name, err) < 0)
        return -1;
    struct stat st;
    int in = sb_files_open_input(host_path, max_bytes, &st, err);
    if (in < 0)
        return -1;
    int rc = sb_files_copy_in_fd(ws_fd, in, host_path, name, max_bytes, owner,
                                 group, err);
    close(in);
    return rc;
}

int
sb_files_mkdir(int ws_fd, const char *name, uid_t owner, gid_t group,
               err_t *err)
{
    if (sb_files_check_name(name, err) < 0)
        return -1;
    int old_uid = -1, old_gid = -1;
    if (owner != (uid_t)-1) {
        old_gid = setfsgid(group);
        old_uid = setfsuid(owner);
    }
    int rc = mkdirat(ws_fd, name, 0755);
    int saved = errno;
    if (owner != (uid_t)-1) {
        setfsuid((uid_t)old_uid);
        setfsgid((gid_t)old_gid);
    }
    if (rc != 0 && saved != EEXIST)
        return err_errnum(err, ERR_IO, saved, "cannot create /mnt/data/%s",
                          name);
    return 0;
}

/* One level of the removal below: the directory's identity, so that
 * climbing back through ".." can be checked. */
struct s_level {
    dev_t dev;
    ino_t ino;
};

/* A directory we could not empty: never descend into it again. */
struct s_stuck {
    struct s_level *v;
    size_t n;
};

static bool
s_is_stuck(const struct s_stuck *st, dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < st->n; i++)
        if (st->v[i].dev == dev && st->v[i].ino == ino)
            return true;
    return false;
}

/* Empty directory fd `top` without recursion and with two fds at most:
 * walk down into the first non-empty subdirectory, remove what can be
 * removed there, climb back up through ".." (checked against the
 * identity recorded on the way down) and rescan. Depth costs 16 bytes of
 * heap per level, never a file descriptor or stack. Returns 0 when the
 * directory is empty, -1 otherwise. */
static int
s_empty_dir(int top)
{
    struct s_level *path = NULL;
    size_t depth = 0, cap = 0;
    struct s_stuck stuck = {0};
    int cur = fcntl(top, F_DUPFD_CLOEXEC, 3);
    int rc = 0;
    if (cur < 0)
        return -1;
    for (;;) {
        int scan = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
        if (!d) {
            if (scan >= 0)
                close(scan);
            rc = -1;
            break;
        }
        int down = -1;
        bool failed = false;
        struct dirent *de;
        while ((de = readdir(d))) {
            const char *n = de->d_name;
            if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
                continue;
            if (unlinkat(cur, n, 0) == 0 || errno == ENOENT)
                continue;
            if (errno != EISDIR && errno != EPERM) {
                failed = true;
                continue;
            }
            if (unlinkat(cur, n, AT_REMOVEDIR) == 0 || errno == ENOENT)
                continue;
            struct stat st;
            if ((errno != ENOTEMPTY && errno != EEXIST) ||
                fstatat(cur, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                !S_ISDIR(st.st_mode) ||
                s_is_stuck(&stuck, st.st_dev, st.st_ino)) {
                failed = true;
                continue;
            }
            down =
                openat(cur, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (down < 0) {
                /* Box code may have left it without search permission;
                 * it is ours (the box's uid maps to ours or we are
                 * root), so give it back and retry once. */
                if (fchmodat(cur, n, 0700, 0) == 0)
                    down =
                        openat(cur, n,
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            }
            if (down < 0) {
                failed = true;
                continue;
            }
            struct stat dst;
            if (fstat(down, &dst) < 0 || dst.st_dev != st.st_dev ||
                dst.st_ino != st.st_ino) {
                close(down);
                down = -1;
                failed = true;
                continue;
            }
            (void)fchmod(down, dst.st_mode | 0700);
            break;
        }
        closedir(d);
        if (down >= 0) {
            struct stat here;
            if (fstat(cur, &here) < 0) {
                close(down);
                rc = -1;
                break;
            }
            if (depth == cap) {
                cap = cap ? cap * 2 : 64;
                path = xrealloc(path, cap * sizeof *path);
            }
            path[depth].dev = here.st_dev;
            path[depth].ino = here.st_ino;
            depth++;
            close(cur);
            cur = down;
            continue;
        }
        if (failed) {
            struct stat here;
            if (depth == 0 || fstat(cur, &here) < 0) {
                rc = -1;
                if (depth == 0)
                    break;
            } else {
                stuck.v = xrealloc(stuck.v, (stuck.n + 1) * sizeof *stuck.v);
                stuck.v[stuck.n].dev = here.st_dev;
                stuck.v[stuck.n].ino = here.st_ino;
                stuck.n++;
            }
        }
        if (depth == 0)
            break;
        /* Climb: ".." must be the directory we came down from (nothing
         * runs in the box any more, but never trust that). */
        int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat ust;
        depth--;
        if (up < 0 || fstat(up, &ust) < 0 || ust.st_dev != path[depth].dev ||
            ust.st_ino != path[depth].ino) {
            if (up >= 0)
                close(up);
            rc = -1;
            break;
        }
        close(cur);
        cur = up;
    }
    close(cur);
    free(path);
    free(stuck.v);
    return rc;
}

int
sb_files_remove_tree(const char *path)
{
    if (unlinkat(AT_FDCWD, path, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = s_empty_dir(fd);
    close(fd);
    if (rc == 0 && rmdir(path) < 0)
        rc = -1;
    return rc;
}
