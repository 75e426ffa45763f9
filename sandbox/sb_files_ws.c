/*
 * sb_files_ws: a live workspace as a small file system (see the header).
 */
#include "sandbox/sb_files_ws.h"

#include "common/xalloc.h"
#include "sandbox/sb_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RESOLVE_SAFE                                                           \
    (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |           \
     RESOLVE_NO_XDEV)

static int
s_openat2(int dirfd, const char *rel, int flags, mode_t mode)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY),
        .mode = mode,
        .resolve = RESOLVE_SAFE};
    long fd = syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof how);
    return fd < 0 ? -errno : (int)fd;
}

/* Switch this thread's fs ids to the box user's (owner (uid_t)-1: keep). */
typedef struct s_ids {
    int uid, gid;
    bool on;
} s_ids_t;

static s_ids_t
s_as(uid_t owner, gid_t group)
{
    s_ids_t s = {-1, -1, false};
    if (owner == (uid_t)-1)
        return s;
    s.gid = setfsgid(group);
    s.uid = setfsuid(owner);
    s.on = true;
    return s;
}

static void
s_back(s_ids_t s)
{
    if (!s.on)
        return;
    setfsuid((uid_t)s.uid);
    setfsgid((gid_t)s.gid);
}

static int
s_fail(err_t *err, const char *rel, int e)
{
    const char *shown = *rel ? rel : ".";
    switch (e) {
    case ELOOP:
        err_set(err, ERR_IO,
                "refused '%s': it passes through a symbolic link (never "
                "followed)",
                shown);
        break;
    case EXDEV:
        err_set(err, ERR_IO, "refused '%s': it leads outside the workspace",
                shown);
        break;
    case ENOENT:
        err_set(err, ERR_IO, "'%s' does not exist", shown);
        break;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        err_set(err, ERR_IO, "'%s': the sandbox's disk is full (--disk)",
                shown);
        break;
    default:
        err_errnum(err, ERR_IO, e, "'%s'", shown);
    }
    return -e;
}

/* The directory holding `rel` (an fd) and its last component. */
static int
s_parent(int ws_fd, const char *rel, const char **name, err_t *err)
{
    if (sb_files_check_relpath(rel, err) < 0)
        return -EINVAL;
    const char *slash = strrchr(rel, '/');
    *name = slash ? slash + 1 : rel;
    char *dir = slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");
    int fd = s_openat2(ws_fd, dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        s_fail(err, dir, -fd);
    free(dir);
    return fd;
}

void
sb_ws_entry_release(sb_ws_entry_t *e)
{
    free(e->path);
    free(e->link_target);
    memset(e, 0, sizeof *e);
}

void
sb_ws_entries_free(sb_ws_entry_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        sb_ws_entry_release(&v[i]);
    free(v);
}

static void
s_fill(sb_ws_entry_t *e, int dirfd, const char *name, const char *path,
       const struct stat *st)
{
    e->path = xstrdup(path);
    const char *slash = strrchr(e->path, '/');
    e->name = slash ? slash + 1 : e->path;
    e->st = *st;
    e->link_target = NULL;
    if (S_ISLNK(st->st_mode)) {
        char buf[4096];
        ssize_t n = readlinkat(dirfd, name, buf, sizeof buf - 1);
        if (n >= 0) {
            buf[n] = '\0';
            e->link_target = xstrdup(buf);
        }
    }
}

int
sb_ws_stat(int ws_fd, const char *rel, sb_ws_entry_t *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (!*rel) {
        if (fstat(ws_fd, &st) < 0)
            return s_fail(err, rel, errno);
        s_fill(out, ws_fd, ".", "", &st);
        return 0;
    }
    const char *name;
    int dfd = s_parent(ws_fd, rel, &name, err);
    if (dfd < 0)
        return dfd;
    int rc = 0;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        rc = s_fail(err, rel, errno);
    else
        s_fill(out, dfd, name, rel, &st);
    close(dfd);
    return rc;
}

/* Append the entries of open directory `fd` (path `rel`) to *v. */
static int
s_list_dir(int fd, const char *rel, unsigned depth, size_t max,
           sb_ws_entry_t **v, size_t *n, size_t *alloc, err_t *err)
{
    int dup_fd = dup(fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return s_fail(err, rel, errno);
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone meanwhile */
        if (*n >= max) {
            rc = -E2BIG;
            err_set(err, ERR_IO, "'%s' holds more than %zu entries",
                    *rel ? rel : ".", max);
            break;
        }
        if (*n == *alloc) {
            *alloc = *alloc ? 2 * *alloc : 64;
            *v = xrealloc(*v, *alloc * sizeof **v);
        }
        char *path =
            *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
        s_fill(&(*v)[(*n)++], fd, de->d_name, path, &st);
        if (depth > 1 && S_ISDIR(st.st_mode)) {
            int sub = s_openat2(fd, de->d_name, O_RDONLY | O_DIRECTORY, 0);
            if (sub >= 0) {
                rc = s_list_dir(sub, path, depth - 1, max, v, n, alloc, err);
                close(sub);
            }
        }
        free(path);
    }
    closedir(d);
    return rc;
}

int
sb_ws_list(int ws_fd, const char *rel, unsigned depth, size_t max,
           sb_ws_entry_t **out, size_t *n, err_t *err)
{
    *out = NULL;
    *n = 0;
    if (*rel && sb_files_check_relpath(rel, err) < 0)
        return -EINVAL;
    int fd = s_openat2(ws_fd, rel, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return s_fail(err, rel, -fd);
    size_t alloc = 0;
    int rc = s_list_dir(fd, rel, depth ? depth : 1, max, out, n, &alloc, err);
    close(fd);
    return rc;
}

int
sb_ws_mkdirs(int ws_fd, const char *rel, uid_t owner, gid_t group,
             bool *created, err_t *err)
{
    if (created)
        *created = false;
    if (!*rel)
        return 0;
    if (sb_files_check_relpath(rel, err) < 0)
        return -EINVAL;
    int cur = dup(ws_fd);
    if (cur < 0)
        return s_fail(err, rel, errno);
    char *copy = xstrdup(rel);
    int rc = 0;
    s_ids_t ids = s_as(owner, group);
    for (char *part = copy, *next; part; part = next) {
        next = strchr(part, '/');
        if (next)
            *next++ = '\0';
        bool made = mkdirat(cur, part, 0755) == 0;
        if (!made && errno != EEXIST) {
            rc = s_fail(err, rel, errno);
            break;
        }
        int sub = s_openat2(cur, part, O_RDONLY | O_DIRECTORY, 0);
        if (sub < 0) {
            struct stat lst;
            if (fstatat(cur, part, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(lst.st_mode)) {
                rc = s_fail(err, rel, ELOOP);
            } else if (-sub == ENOTDIR) {
                err_set(err, ERR_IO, "'%s': '%s' exists and is not a directory",
                        rel, part);
                rc = -EEXIST;
            } else {
                rc = s_fail(err, rel, -sub);
            }
            break;
        }
        close(cur);
        cur = sub;
        if (!next && created)
            *created = made;
    }
    s_back(ids);
    close(cur);
    free(copy);
    return rc;
}

int
sb_ws_open_read(int ws_fd, const char *rel, struct stat *st, err_t *err)
{
    if (sb_files_check_relpath(rel, err) < 0)
        return -EINVAL;
    int fd = s_openat2(ws_fd, rel, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0)
        return s_fail(err, rel, -fd);
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        int e = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
        close(fd);
        if (e == EINVAL)
            err_set(err, ERR_IO, "refused '%s': not a regular file", rel);
        else
            err_set(err, ERR_IO, "'%s' is a directory", rel);
        return -e;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int
sb_ws_open_dir(int ws_fd, const char *rel, err_t *err)
{
    if (sb_files_check_relpath(rel, err) < 0)
        return -EINVAL;
    int fd = s_openat2(ws_fd, rel, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return s_fail(err, rel, -fd);
    return fd;
}

struct sb_ws_upload {
    int dirfd;        /* the target's directory */
    int fd;           /* the temporary file */
    char *name;       /* the target's last component */
    char tmp[64];     /* the temporary file's name */
    char *path;       /* the target, relative */
    uint64_t written; /* bytes so far */
    uint64_t max;
    uid_t owner;
    gid_t group;
};

sb_ws_upload_t *
sb_ws_upload_begin(int ws_fd, const char *rel, uid_t owner, gid_t group,
                   uint64_t max_bytes, int *rc, err_t *err)
{
    *rc = 0;
    if (sb_files_check_relpath(rel, err) < 0) {
        *rc = -EINVAL;
        return NULL;
    }
    const char *slash = strrchr(rel, '/');
    if (slash) {
        char *dir = xstrndup(rel, (size_t)(slash - rel));
        *rc = sb_ws_mkdirs(ws_fd, dir, owner, group, NULL, err);
        free(dir);
        if (*rc < 0)
            return NULL;
    }
    const char *name;
    int dfd = s_parent(ws_fd, rel, &name, err);
    if (dfd < 0) {
        *rc = dfd;
        return NULL;
    }
    sb_ws_upload_t *u = xcalloc(1, sizeof *u);
    u->dirfd = dfd;
    u->name = xstrdup(name);
    u->path = xstrdup(rel);
    u->max = max_bytes;
    u->owner = owner;
    u->group = group;
    unsigned char raw[8];
    randombytes_buf(raw, sizeof raw);
    char hex[17];
    sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
    snprintf(u->tmp, sizeof u->tmp, ".ja-upload-%s", hex);
    s_ids_t ids = s_as(owner, group);
    u->fd = s_openat2(dfd, u->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    s_back(ids);
    if (u->fd < 0) {
        *rc = s_fail(err, rel, -u->fd);
        close(dfd);
        free(u->name);
        free(u->path);
        free(u);
        return NULL;
    }
    return u;
}

int
sb_ws_upload_write(sb_ws_upload_t *u, const void *data, size_t len, err_t *err)
{
    if (len > u->max - u->written) {
        err_set(err, ERR_IO,
                "'%s': more than %llu bytes, the sandbox's disk size "
                "(--disk)",
                u->path, (unsigned long long)u->max);
        return -EFBIG;
    }
    const char *p = data;
    while (len) {
        ssize_t n = write(u->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return s_fail(err, u->path, n < 0 ? errno : ENOSPC);
        p += n;
        len -= (size_t)n;
        u->written += (uint64_t)n;
    }
    return 0;
}

static void
s_upload_free(sb_ws_upload_t *u)
{
    if (u->fd >= 0)
        close(u->fd);
    close(u->dirfd);
    free(u->name);
    free(u->path);
    free(u);
}

int
sb_ws_upload_commit(sb_ws_upload_t **p, err_t *err)
{
    sb_ws_upload_t *u = *p;
    *p = NULL;
    int rc = 0;
    struct stat st;
    if (fstatat(u->dirfd, u->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode)) {
        err_set(err, ERR_IO, "'%s' is a directory", u->path);
        rc = -EISDIR;
    } else {
        s_ids_t ids = s_as(u->owner, u->group);
        if (renameat(u->dirfd, u->tmp, u->dirfd, u->name) < 0)
            rc = s_fail(err, u->path, errno);
        s_back(ids);
    }
    if (rc < 0)
        unlinkat(u->dirfd, u->tmp, 0);
    s_upload_free(u);
    return rc;
}

void
sb_ws_upload_abort(sb_ws_upload_t **p)
{
    if (!p || !*p)
        return;
    sb_ws_upload_t *u = *p;
    *p = NULL;
    unlinkat(u->dirfd, u->tmp, 0);
    s_upload_free(u);
}

const char *
sb_ws_upload_path(const sb_ws_upload_t *u)
{
    return u->path;
}

int
sb_ws_move(int ws_fd, const char *from, const char *to, uid_t owner,
           gid_t group, err_t *err)
{
    if (!*from || !*to) {
        err_set(err, ERR_IO, "the workspace itself cannot be moved");
        return -EBUSY;
    }
    const char *slash = strrchr(to, '/');
    if (slash) {
        char *dir = xstrndup(to, (size_t)(slash - to));
        int rc = sb_ws_mkdirs(ws_fd, dir, owner, group, NULL, err);
        free(dir);
        if (rc < 0)
            return rc;
    }
    const char *fname, *tname;
    int ffd = s_parent(ws_fd, from, &fname, err);
    if (ffd < 0)
        return ffd;
    int tfd = s_parent(ws_fd, to, &tname, err);
    if (tfd < 0) {
        close(ffd);
        return tfd;
    }
    s_ids_t ids = s_as(owner, group);
    int rc =
        renameat(ffd, fname, tfd, tname) < 0 ? s_fail(err, from, errno) : 0;
    s_back(ids);
    close(ffd);
    close(tfd);
    return rc;
}

int
sb_ws_remove(int ws_fd, const char *rel, uid_t owner, gid_t group, err_t *err)
{
    if (!*rel) {
        err_set(err, ERR_IO, "the workspace itself cannot be removed");
        return -EBUSY;
    }
    const char *name;
    int dfd = s_parent(ws_fd, rel, &name, err);
    if (dfd < 0)
        return dfd;
    struct stat st;
    int rc = 0;
    s_ids_t ids = s_as(owner, group);
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        rc = s_fail(err, rel, errno);
    } else if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dfd, name, 0) < 0)
            rc = s_fail(err, rel, errno);
    } else {
        /* The tree walk never follows a link; it starts from our own
         * directory fd, which names the box's directory, not a path. */
        char *path = xasprintf("/proc/self/fd/%d/%s", dfd, name);
        if (sb_files_remove_tree(path) < 0)
            rc = s_fail(err, rel, errno ? errno : EIO);
        free(path);
    }
    s_back(ids);
    close(dfd);
    return rc;
}
