/* sb_outdir: everything that writes out of the box onto the host: the
 * output directory (sb_outdir_*, sb_outfile_*), the walk that copies a
 * workspace tree out (sb_files_copy_out, sb_outdir_copy), box to box
 * (sb_files_copy_tree) or lists it (sb_files_list). Declared in
 * sb_files.h; stands on sb_files.c (sb_files_impl.h), which calls nothing
 * here. */
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

/* openat2 creating `rel` beneath `dirfd`: O_EXCL, never through a
 * symlink; returns fd or -errno. */
static int
s_create_beneath(int dirfd, const char *rel, mode_t mode)
{
    struct open_how how = {.flags =
                               (uint64_t)(O_WRONLY | O_CREAT | O_EXCL |
                                          O_NOFOLLOW | O_CLOEXEC | O_NOCTTY),
                           .mode = mode,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
    return fd < 0 ? -errno : (int)fd;
}

void
sb_files_out_opts_init(sb_files_out_opts_t *o, uint64_t max_bytes)
{
    memset(o, 0, sizeof *o);
    o->max_bytes = max_bytes;
    o->max_entries = SB_FILES_OUT_MAX_ENTRIES;
    o->max_depth = SB_FILES_OUT_MAX_DEPTH;
}

struct sb_outdir {
    int fd;                /* owned: the directory we created or opened */
    char *path;            /* owned: as the user gave it */
    sb_files_out_opts_t o; /* caps and rules */
    uint64_t bytes;        /* written so far */
    size_t entries;        /* files and directories created so far */
    buf_t refused;         /* "'a' (FIFO), 'b' (dot-file ...)", escaped */
    int n_refused;         /* entries skipped since the last report */
    unsigned n_temp;       /* temporary names handed out (sb_outfile) */
};

/* sb_outdir_open, or with `probe` only its checks: nothing is created,
 * and a missing DIR needs a parent we can create it in. Returns the
 * directory's fd (probe: 0), or -1 + err. */
static int
s_outdir_fd(const char *path, const sb_files_out_opts_t *o, bool probe,
            err_t *err)
{
    char *copy = xstrdup(path ? path : "");
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *name = slash ? slash + 1 : copy;
    const char *parent = slash ? (slash == copy ? "/" : copy) : ".";
    if (slash)
        *slash = '\0';
    int pfd = -1, fd = -1, rc = -1;
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        err_set(err, ERR_USAGE,
                "'%s': name a new directory for the files (not '.', '..' or "
                "'/')",
                path);
        goto out;
    }
    pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) {
        err_errno(err, ERR_USAGE, "cannot open '%s' (to create '%s' in it)",
                  parent, name);
        goto out;
    }
    struct stat lst;
    if (probe && fstatat(pfd, name, &lst, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) {
            err_errno(err, ERR_USAGE, "cannot use '%s'", path);
        } else if (faccessat(pfd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
            err_set(err, ERR_USAGE,
                    "cannot create '%s': '%s' is not writable (%s); choose "
                    "another directory",
                    path, parent, strerror(errno));
        } else {
            rc = 0; /* created at the end */
        }
        goto out;
    }
    bool created = !probe && mkdirat(pfd, name, 0755) == 0;
    if (!created && !probe && errno != EEXIST) {
        err_errno(err, ERR_IO, "cannot create '%s'", path);
        goto out;
    }
    fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP || errno == ENOTDIR)
            err_set(err, ERR_USAGE,
                    "'%s' exists and is a symbolic link or not a directory; "
                    "refusing to write through it: choose a new directory",
                    path);
        else
            err_errno(err, ERR_IO, "cannot open '%s'", path);
        goto out;
    }
    if (!created) {
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
            err_set(err, ERR_USAGE,
                    "'%s' exists and belongs to another user; refusing to "
                    "write into it: choose a new directory",
                    path);
            goto out;
        }
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
        bool empty = dir != NULL;
        struct dirent *de;
        while (dir && (de = readdir(dir)))
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                empty = false;
        if (dir)
            closedir(dir);
        else if (dfd >= 0)
            close(dfd);
        if (!empty && !o->force) {
            err_set(err, ERR_USAGE,
                    "'%s' already exists and is not empty; choose a new "
                    "directory, or pass --force to add to it (files there "
                    "are never overwritten)",
                    path);
            goto out;
        }
    }
    if (probe) {
        rc = 0;
    } else {
        rc = fd;
        fd = -1;
    }
out:
    if (fd >= 0)
        close(fd);
    if (pfd >= 0)
        close(pfd);
    free(copy);
    return rc;
}

int
sb_outdir_check(const char *path, const sb_files_out_opts_t *o, err_t *err)
{
    return s_outdir_fd(path, o, true, err) < 0 ? -1 : 0;
}

sb_outdir_t *
sb_outdir_open(const char *path, const sb_files_out_opts_t *o, err_t *err)
{
    int fd = s_outdir_fd(path, o, false, err);
    if (fd < 0)
        return NULL;
    sb_outdir_t *d = xcalloc(1, sizeof *d);
    d->fd = fd;
    d->path = xstrdup(path);
    d->o = *o;
    buf_init(&d->refused, 4096);
    return d;
}

void
sb_outdir_destroy(sb_outdir_t **p)
{
    if (!p || !*p)
        return;
    close((*p)->fd);
    free((*p)->path);
    buf_release(&(*p)->refused);
    free(*p);
    *p = NULL;
}

const char *
sb_outdir_path(const sb_outdir_t *d)
{
    return d->path;
}

const sb_files_out_opts_t *
sb_outdir_opts(const sb_outdir_t *d)
{
    return &d->o;
}

size_t
sb_outdir_entries(const sb_outdir_t *d)
{
    return d->entries;
}

/* Reserve one entry and `bytes` against the caps; -1 + err if over. */
static int
s_outdir_charge(sb_outdir_t *d, uint64_t bytes, const char *rel, err_t *err)
{
    if (d->entries >= d->o.max_entries) {
        char *e = esc_dup(rel, ESC_NAME);
        err_set(err, ERR_IO,
                "'%s' would be entry %zu, over the cap of %zu files and "
                "directories; stopped",
                e, d->entries + 1, d->o.max_entries);
        free(e);
        return -1;
    }
    if (bytes > d->o.max_bytes || d->bytes > d->o.max_bytes - bytes) {
        char *e = esc_dup(rel, ESC_NAME);
        err_set(err, ERR_IO,
                "'%s' would pass the %llu-byte cap on files copied out; "
                "stopped",
                e, (unsigned long long)d->o.max_bytes);
        free(e);
        return -1;
    }
    d->entries++;
    return 0;
}

int
sb_outdir_write(sb_outdir_t *d, const char *name, const void *data, size_t len,
                err_t *err)
{
    if (sb_files_check_name(name, err) < 0)
        return -1;
    if (s_outdir_charge(d, len, name, err) < 0)
        return -1;
    int fd = s_create_beneath(d->fd, name, 0644);
    if (fd < 0)
        return err_set(err, ERR_IO, "cannot create '%s/%s': %s%s", d->path,
                       name, strerror(-fd),
                       -fd == EEXIST ? " (never overwritten)" : "");
    int rc = 0;
    if (file_write_all(fd, data, len) < 0)
        rc = err_errno(err, ERR_IO, "writing '%s/%s'", d->path, name);
    else
        d->bytes += len;
    close(fd);
    if (rc == 0 && d->o.on_file)
        d->o.on_file(d->o.on_file_arg, d->path, name, d->fd, name);
    return rc;
}

const char *
sb_files_out_refusal(const char *relpath, bool is_dir, unsigned max_depth)
{
    if (!*relpath)
        return "empty name";
    if (relpath[0] == '/')
        return "absolute path; never copied out";
    if (strlen(relpath) >= 4096)
        return "path too long";
    unsigned dirs = 0;
    for (const char *c = relpath;;) {
        const char *start = c;
        while (*c && *c != '/')
            c++;
        size_t n = (size_t)(c - start);
        bool last = *c == '\0';
        if (n == 2 && start[0] == '.' && start[1] == '.')
            return "'..' leads outside; never copied out";
        if (n == 0 || (n == 1 && start[0] == '.'))
            return "empty or '.' component";
        if (start[0] == '.')
            return last && !is_dir ? "dot-file; never copied out"
                                   : "dot-directory; never copied out";
        if (n > 255)
            return "name too long";
        if (last)
            break;
        dirs++;
        c++;
    }
    if (dirs + (is_dir ? 1 : 0) > max_depth)
        return "directory nested too deeply";
    return NULL;
}

/* Open (creating as needed, each new one charged) the directories of
 * `relpath` before its last component. Returns the last directory's fd
 * (or a dup of DIR's) and sets *leaf to the last component; -2 when
 * refused (recorded); -1 + err. Messages name `label`. */
static int
s_out_dirs(sb_outdir_t *d, const char *relpath, const char *label, bool all,
           const char **leaf, err_t *err)
{
    const char *why = sb_files_out_refusal(relpath, all, d->o.max_depth);
    if (why) {
        sb_outdir_refuse(d, label, why);
        return -2;
    }
    int fd = fcntl(d->fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return err_errno(err, ERR_IO, "%s", d->path);
    char comp[256];
    const char *c = relpath;
    for (;;) {
        const char *start = c;
        while (*c && *c != '/')
            c++;
        size_t n = (size_t)(c - start);
        if (!*c && !all) {
            *leaf = start;
            return fd;
        }
        memcpy(comp, start, n);
        comp[n] = '\0';
        if (mkdirat(fd, comp, 0755) == 0) {
            if (s_outdir_charge(d, 0, label, err) < 0) {
                unlinkat(fd, comp, AT_REMOVEDIR);
                close(fd);
                return -1;
            }
        } else if (errno != EEXIST) {
            char *e = esc_dup(label, ESC_NAME);
            err_errno(err, ERR_IO, "creating directory for '%s'", e);
            free(e);
            close(fd);
            return -1;
        }
        int sub = sb_files_open_beneath(fd, comp, O_RDONLY | O_DIRECTORY);
        close(fd);
        if (sub < 0) {
            sb_outdir_refuse(d, label,
                             -sub == ELOOP || -sub == ENOTDIR
                                 ? "a file or symbolic link is in its place"
                                 : strerror(-sub));
            return -2;
        }
        fd = sub;
        if (!*c) {
            *leaf = c;
            return fd;
        }
        c++;
    }
}

int
sb_outdir_mkdir(sb_outdir_t *d, const char *relpath, const char *label,
                err_t *err)
{
    const char *leaf;
    int fd = s_out_dirs(d, relpath, label ? label : relpath, true, &leaf, err);
    if (fd < 0)
        return fd == -2 ? 1 : -1;
    close(fd);
    return 0;
}

struct sb_outfile {
    sb_outdir_t *od; /* borrowed: the caps and counters */
    int dirfd;       /* owned: the file's directory */
    int fd;          /* owned: the temporary file */
    char *relpath;   /* owned: as claimed, for messages */
    char *name;      /* owned: the final name in dirfd */
    char tmp[64];    /* the temporary dot-name in dirfd */
};

int
sb_outdir_create(sb_outdir_t *d, const char *relpath, const char *label,
                 uint64_t size, bool exec, sb_outfile_t **out, err_t *err)
{
    *out = NULL;
    if (!label)
        label = relpath;
    const char *leaf;
    int dirfd = s_out_dirs(d, relpath, label, false, &leaf, err);
    if (dirfd < 0)
        return dirfd == -2 ? 1 : -1;
    struct stat st;
    if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        sb_outdir_refuse(d, label, "already exists; not overwritten");
        close(dirfd);
        return 1;
    }
    if (s_outdir_charge(d, size, label, err) < 0) {
        close(dirfd);
        return -1;
    }
    sb_outfile_t *f = xcalloc(1, sizeof *f);
    f->od = d;
    f->dirfd = dirfd;
    f->fd = -1;
    for (int tries = 0; f->fd < 0 && tries < 100; tries++) {
        snprintf(f->tmp, sizeof f->tmp, ".jupyter-agent-%ld-%u.part",
                 (long)getpid(), d->n_temp++);
        f->fd = s_create_beneath(dirfd, f->tmp,
                                 exec && d->o.keep_exec ? 0755 : 0644);
        if (f->fd < 0 && f->fd != -EEXIST)
            break;
    }
    if (f->fd < 0) {
        char *e = esc_dup(label, ESC_NAME);
        err_errnum(err, ERR_IO, -f->fd, "creating copy of '%s' in '%s'", e,
                   d->path);
        free(e);
        close(dirfd);
        free(f);
        return -1;
    }
    f->relpath = xstrdup(label);
    f->name = xstrdup(leaf);
    *out = f;
    return 0;
}

int
sb_outfile_write(sb_outfile_t *f, const void *data, size_t len, err_t *err)
{
    sb_outdir_t *d = f->od;
    if (len > d->o.max_bytes || d->bytes > d->o.max_bytes - len) {
        char *e = esc_dup(f->relpath, ESC_NAME);
        err_set(err, ERR_IO,
                "'%s' would pass the %llu-byte cap on files copied out; "
                "stopped",
                e, (unsigned long long)d->o.max_bytes);
        free(e);
        return -1;
    }
    if (file_write_all(f->fd, data, len) < 0) {
        char *e = esc_dup(f->relpath, ESC_NAME);
        err_errno(err, ERR_IO, "writing '%s' in '%s'", e, d->path);
        free(e);
        return -1;
    }
    d->bytes += len;
    return 0;
}

static void
s_outfile_free(sb_outfile_t *f)
{
    if (f->fd >= 0)
        close(f->fd);
    close(f->dirfd);
    free(f->relpath);
    free(f->name);
    free(f);
}

void
sb_outfile_abort(sb_outfile_t **p)
{
    if (!p || !*p)
        return;
    unlinkat((*p)->dirfd, (*p)->tmp, 0);
    s_outfile_free(*p);
    *p = NULL;
}

int
sb_outfile_commit(sb_outfile_t **p, err_t *err)
{
    sb_outfile_t *f = *p;
    *p = NULL;
    int rc = 0;
    if (close(f->fd) < 0) {
        f->fd = -1;
        char *e = esc_dup(f->relpath, ESC_NAME);
        rc = err_errno(err, ERR_IO, "writing '%s' in '%s'", e, f->od->path);
        free(e);
        goto out;
    }
    f->fd = -1;
    /* Never over an existing entry: RENAME_NOREPLACE, or where the
     * filesystem lacks it, a hard link (which fails on EEXIST too). */
    int r = renameat2(f->dirfd, f->tmp, f->dirfd, f->name, RENAME_NOREPLACE);
    if (r < 0 && (errno == EINVAL || errno == ENOSYS)) {
        r = linkat(f->dirfd, f->tmp, f->dirfd, f->name, 0);
        if (r == 0)
            unlinkat(f->dirfd, f->tmp, 0);
    }
    if (r < 0 && errno == EEXIST) {
        sb_outdir_refuse(f->od, f->relpath, "already exists; not overwritten");
        rc = 1;
    } else if (r < 0) {
        char *e = esc_dup(f->relpath, ESC_NAME);
        rc = err_errno(err, ERR_IO, "moving '%s' into place in '%s'", e,
                       f->od->path);
        free(e);
    }
out:
    if (rc != 0)
        unlinkat(f->dirfd, f->tmp, 0);
    else if (f->od->o.on_file)
        f->od->o.on_file(f->od->o.on_file_arg, f->od->path, f->relpath,
                         f->dirfd, f->name);
    s_outfile_free(f);
    return rc;
}

struct s_walk {
    uint64_t max_total; /* cap over all files (copy_tree) */
    uint64_t copied;    /* bytes so far (copy_tree) */
    sb_outdir_t *od;    /* copy-out: caps, rules, counters and the entries
                           skipped as unsafe; else NULL */
    json_t *list;       /* when listing: array to fill, else NULL */
    size_t max_entries; /* listing cap */
};

void
sb_outdir_refuse(sb_outdir_t *d, const char *rel, const char *why)
{
    d->n_refused++;
    if (d->n_refused <= 8) {
        buf_puts(&d->refused, d->n_refused > 1 ? ", '" : "'");
        esc_append(&d->refused, rel, strlen(rel), ESC_NAME);
        buf_printf(&d->refused, "' (%s)", why);
    }
}

int
sb_outdir_report(sb_outdir_t *d, int rc, err_t *err)
{
    int n = d->n_refused;
    if (n) {
        if (rc < 0 && err) {
            char first[sizeof err->text];
            snprintf(first, sizeof first, "%s", err->text);
            err_set(err, err->code, "%s; skipped %d unsafe entr%s before: %s%s",
                    first, n, n == 1 ? "y" : "ies", buf_cstr(&d->refused),
                    n > 8 ? ", ..." : "");
        } else if (rc == 0)
            rc = err_set(err, ERR_IO,
                         "copied the rest, but skipped %d unsafe entr%s: %s%s",
                         n, n == 1 ? "y" : "ies", buf_cstr(&d->refused),
                         n > 8 ? ", ..." : "");
    }
    d->n_refused = 0;
    buf_reset(&d->refused);
    return rc;
}

/* An unsafe entry: named in the copy-out's error; box-to-box copies
 * (copy_tree) skip it silently. */
static void
s_refuse(struct s_walk *w, const char *rel, const char *why)
{
    if (w->od)
        sb_outdir_refuse(w->od, rel, why);
}

static int s_walk_dir(struct s_walk *w, int dirfd, int destfd, const char *rel,
                      int depth, err_t *err);

/* Copy the regular file open as `fd` to `name` in `destfd`. */
static int
s_walk_copy_file(struct s_walk *w, int fd, const struct stat *st, int destfd,
                 const char *name, const char *rel, err_t *err)
{
    uint64_t *copied = w->od ? &w->od->bytes : &w->copied;
    uint64_t max = w->od ? w->od->o.max_bytes : w->max_total;
    if (w->od) {
        if (s_outdir_charge(w->od, (uint64_t)st->st_size, rel, err) < 0)
            return -1;
    } else if (*copied + (uint64_t)st->st_size > max) {
        return err_set(err, ERR_IO,
                       "copying '%s' would pass the %llu-byte cap; stopped",
                       rel, (unsigned long long)max);
    }
    /* Never setuid, setgid or sticky; the owner's exec bit survives only
     * when asked for (keep_exec), and in box-to-box copies. */
    bool exec = (st->st_mode & S_IXUSR) && (!w->od || w->od->o.keep_exec);
    int out = s_create_beneath(destfd, name, exec ? 0755 : 0644);
    if (out == -EEXIST) {
        s_refuse(w, rel, "already exists; not overwritten");
        return 0;
    }
    if (out < 0) {
        char *e = esc_dup(rel, ESC_NAME);
        err_errnum(err, ERR_IO, -out, "creating copy of '%s'", e);
        free(e);
        return -1;
    }
    char *e = esc_dup(rel, ESC_NAME);
    char *what = xasprintf("'%s'", e);
    free(e);
    int rc = 0;
    if (fcntl(fd, F_SETFL, 0) < 0 ||
        sb_files_copy_fd(fd, out, max, copied, what, err) < 0)
        rc = -1;
    free(what);
    close(out);
    if (rc == 0 && w->od && w->od->o.on_file)
        w->od->o.on_file(w->od->o.on_file_arg, w->od->path, rel, destfd, name);
    return rc;
}

static int
s_walk_entry(struct s_walk *w, int dirfd, int destfd, const char *name,
             const char *rel, int depth, err_t *err)
{
    struct stat lst;
    if (fstatat(dirfd, name, &lst, AT_SYMLINK_NOFOLLOW) < 0)
        return 0; /* vanished meanwhile */
    if (!S_ISREG(lst.st_mode) && !S_ISDIR(lst.st_mode)) {
        s_refuse(w, rel, sb_files_kind(lst.st_mode));
        return 0;
    }
    if (w->od && name[0] == '.') {
        s_refuse(w, rel,
                 S_ISDIR(lst.st_mode) ? "dot-directory; never copied out"
                                      : "dot-file; never copied out");
        return 0;
    }
    int fd = sb_files_open_beneath(
        dirfd, name,
        O_RDONLY | O_NONBLOCK | (S_ISDIR(lst.st_mode) ? O_DIRECTORY : 0));
    if (fd < 0) {
        s_refuse(w, rel, -fd == ELOOP ? "symbolic link" : strerror(-fd));
        return 0;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0 || (st.st_mode & S_IFMT) != (lst.st_mode & S_IFMT)) {
        s_refuse(w, rel, "changed while copying");
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        int max_depth = w->od ? (int)w->od->o.max_depth : MAX_DEPTH;
        if (depth >= max_depth) {
            s_refuse(w, rel, "directory nested too deeply");
            goto out;
        }
        int sub = -1;
        if (destfd >= 0) {
            if (w->od && s_outdir_charge(w->od, 0, rel, err) < 0) {
                rc = -1;
                goto out;
            }
            if (mkdirat(destfd, name, 0755) < 0 && errno != EEXIST) {
                char *e = esc_dup(rel, ESC_NAME);
                rc = err_errno(err, ERR_IO, "creating directory for '%s'", e);
                free(e);
                goto out;
            }
            sub = sb_files_open_beneath(destfd, name, O_RDONLY | O_DIRECTORY);
            if (sub < 0) {
                s_refuse(w, rel,
                         -sub == ELOOP ? "a symbolic link is in its place"
                                       : strerror(-sub));
                goto out;
            }
        }
        rc = s_walk_dir(w, fd, sub, rel, depth + 1, err);
        if (sub >= 0)
            close(sub);
        goto out;
    }
    if (w->list) {
        if (json_array_size(w->list) < w->max_entries)
            json_array_append_new(w->list,
                                  json_pack("{s:s, s:I}", "path", rel, "size",
                                            (json_int_t)st.st_size));
        goto out;
    }
    rc = s_walk_copy_file(w, fd, &st, destfd, name, rel, err);
out:
    close(fd);
    return rc;
}

static int
s_walk_dir(struct s_walk *w, int dirfd, int destfd, const char *rel, int depth,
           err_t *err)
{
    int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return err_errno(err, ERR_IO, "listing '%s'", rel);
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *child = strcmp(rel, ".") == 0
                          ? xstrdup(de->d_name)
                          : xasprintf("%s/%s", rel, de->d_name);
        rc = s_walk_entry(w, dirfd, destfd, de->d_name, child, depth, err);
        free(child);
    }
    closedir(d);
    return rc;
}

static int
s_open_rel_dir(int ws_fd, const char *rel_dir, err_t *err)
{
    if (strcmp(rel_dir, ".") != 0 && sb_files_check_relpath(rel_dir, err) < 0)
        return -1;
    int fd = sb_files_open_beneath(ws_fd, rel_dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return sb_files_open_error(err, rel_dir, -fd);
    return fd;
}

int
sb_outdir_copy(sb_outdir_t *od, int ws_fd, const char *rel_dir,
               size_t *n_copied, err_t *err)
{
    size_t before = od->entries;
    if (n_copied)
        *n_copied = 0;
    int src = s_open_rel_dir(ws_fd, rel_dir, err);
    if (src < 0)
        return -1;
    struct s_walk w = {.od = od};
    int rc = s_walk_dir(&w, src, od->fd, rel_dir, 0, err);
    if (n_copied)
        *n_copied = od->entries - before;
    rc = sb_outdir_report(od, rc, err);
    close(src);
    return rc;
}

int
sb_files_copy_out(int ws_fd, const char *rel_dir, const char *dest_dir,
                  const sb_files_out_opts_t *o, size_t *n_copied, err_t *err)
{
    if (n_copied)
        *n_copied = 0;
    sb_outdir_t *od = sb_outdir_open(dest_dir, o, err);
    if (!od)
        return -1;
    int rc = sb_outdir_copy(od, ws_fd, rel_dir, n_copied, err);
    sb_outdir_destroy(&od);
    return rc;
}
int
sb_files_copy_tree(int src_fd, int dest_fd, uint64_t max_total, uid_t owner,
                   gid_t group, err_t *err)
{
    int old_uid = -1, old_gid = -1;
    if (owner != (uid_t)-1) {
        old_gid = setfsgid(group);
        old_uid = setfsuid(owner);
    }
    struct s_walk w = {.max_total = max_total};
    int rc = s_walk_dir(&w, src_fd, dest_fd, ".", 0, err);
    if (owner != (uid_t)-1) {
        setfsuid((uid_t)old_uid);
        setfsgid((gid_t)old_gid);
    }
    return rc;
}

json_t *
sb_files_list(int ws_fd, size_t max_entries)
{
    struct s_walk w = {.max_total = UINT64_MAX,
                       .list = json_array(),
                       .max_entries = max_entries};
    int src = s_open_rel_dir(ws_fd, ".", NULL);
    if (src >= 0) {
        s_walk_dir(&w, src, -1, ".", 0, NULL);
        close(src);
    }
    return w.list;
}
