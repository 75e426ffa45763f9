#include "notebook-io/nb_archive.h"
#include "common/fileio.h"
#include "common/xalloc.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <locale.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { CHUNK = 1 << 16 };

/* libarchive converts names through the current locale, and a program
 * that never called setlocale() runs in "C", where a UTF-8 name has no
 * form: read and write archives in C.UTF-8 on this thread (names are
 * checked as UTF-8 by our own rules either way). Returns the locale to
 * give back to s_locale_end. */
static locale_t
s_locale_begin(void)
{
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (l == (locale_t)0)
        return (locale_t)0;
    locale_t old = uselocale(l);
    return old;
}

static void
s_locale_end(locale_t old)
{
    if (old == (locale_t)0)
        return;
    locale_t mine = uselocale(old);
    freelocale(mine);
}

void
nb_sha256_hex(const void *data, size_t len, char out[NB_SHA256_HEX])
{
    unsigned char h[NB_SHA256_BYTES];
    crypto_hash_sha256(h, data, len);
    sodium_bin2hex(out, NB_SHA256_HEX, h, sizeof h);
}

int
nb_sha256_file(const char *path, char hex[NB_SHA256_HEX], uint64_t *size,
               err_t *err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return err_errnum(err, ERR_USAGE, e, "cannot read %s", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, ERR_USAGE, "%s is not a regular file", path);
    }
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    unsigned char buf[1 << 16];
    uint64_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return err_errnum(err, ERR_IO, e, "cannot read %s", path);
        }
        if (r == 0)
            break;
        crypto_hash_sha256_update(&h, buf, (size_t)r);
        n += (uint64_t)r;
    }
    close(fd);
    unsigned char d[NB_SHA256_BYTES];
    crypto_hash_sha256_final(&h, d);
    sodium_bin2hex(hex, NB_SHA256_HEX, d, sizeof d);
    *size = n;
    return 0;
}

int
nb_archive_name_check(const char *name, err_t *err)
{
    size_t len = strlen(name);
    if (len == 0)
        return err_set(err, ERR_VERIFY, "an entry has an empty name");
    if (len > NB_ARCHIVE_NAME_MAX)
        return err_set(err, ERR_VERIFY, "an entry name is %zu bytes (limit %d)",
                       len, NB_ARCHIVE_NAME_MAX);
    /* jansson refuses invalid UTF-8: one validator for the whole project's
     * JSON and names alike. */
    json_t *valid = json_stringn(name, len);
    if (!valid)
        return err_set(err, ERR_VERIFY, "an entry name is not valid UTF-8");
    json_decref(valid);
    /* C0, DEL, backslash, and C1 controls (U+0080..U+009F, encoded
     * C2 80..C2 9F), which some terminals obey. */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == '\\' ||
            (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return err_set(err, ERR_VERIFY,
                           "an entry name has a control byte or a backslash "
                           "(at byte %zu)",
                           (size_t)((const char *)p - name));
    if (name[0] == '/')
        return err_set(err, ERR_VERIFY, "entry '%s' has an absolute name",
                       name);
    const char *c = name;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t n = slash ? (size_t)(slash - c) : strlen(c);
        if (n == 0 && slash)
            return err_set(err, ERR_VERIFY,
                           "entry '%s' has an empty path component", name);
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return err_set(err, ERR_VERIFY,
                           "entry '%s' has a '%.*s' path component", name,
                           (int)n, c);
        if (!slash)
            break;
        c = slash + 1;
    }
    return 0;
}

/* ---- writing ------------------------------------------------------------ */

struct nb_archive_writer {
    struct archive *a; /* owned */
    int fd;            /* the temporary file */
    char *path;        /* owned destination */
    char *tmp;         /* owned temporary path */
    json_t *names;     /* owned set of names added */
    time_t when;       /* every entry's mtime */
};

nb_archive_writer_t *
nb_archive_writer_new(const char *path, bool force, err_t *err)
{
    struct stat st;
    if (!force && lstat(path, &st) == 0) {
        err_set(err, ERR_USAGE, "%s exists; choose another -o or add --force",
                path);
        return NULL;
    }
    if (file_check_output(path, NULL, err)) /* --force replaces files only */
        return NULL;
    nb_archive_writer_t *w = xcalloc(1, sizeof *w);
    w->path = xstrdup(path);
    char *dup = xstrdup(path);
    w->tmp = xasprintf("%s/.%s.XXXXXX", dirname(dup), basename(w->path));
    free(dup);
    w->fd = mkostemp(w->tmp, O_CLOEXEC);
    if (w->fd < 0) {
        err_errno(err, ERR_IO, "cannot create a file next to %s", path);
        free(w->tmp);
        w->tmp = NULL;
        nb_archive_writer_destroy(&w);
        return NULL;
    }
    w->names = json_object();
    w->when = time(NULL);
    w->a = archive_write_new();
    if (archive_write_set_format_zip(w->a) != ARCHIVE_OK ||
        archive_write_zip_set_compression_deflate(w->a) != ARCHIVE_OK ||
        archive_write_open_fd(w->a, w->fd) != ARCHIVE_OK) {
        err_set(err, ERR_IO, "cannot start the archive %s: %s", path,
                archive_error_string(w->a));
        nb_archive_writer_destroy(&w);
        return NULL;
    }
    return w;
}

static int
s_begin_entry(nb_archive_writer_t *w, const char *name, uint64_t size,
              err_t *err)
{
    if (nb_archive_name_check(name, err))
        return -1;
    if (json_object_get(w->names, name))
        return err_set(err, ERR_USAGE, "two files would be stored as '%s'",
                       name);
    json_object_set_new(w->names, name, json_true());
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname_utf8(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, w->when, 0);
    locale_t old_locale = s_locale_begin();
    int rc = archive_write_header(w->a, e);
    s_locale_end(old_locale);
    archive_entry_free(e);
    if (rc != ARCHIVE_OK)
        return err_set(err, ERR_IO, "cannot add %s: %s", name,
                       archive_error_string(w->a));
    return 0;
}

static int
s_write(nb_archive_writer_t *w, const char *name, const void *p, size_t n,
        err_t *err)
{
    if (n && archive_write_data(w->a, p, n) != (la_ssize_t)n)
        return err_set(err, ERR_IO, "cannot write %s: %s", name,
                       archive_error_string(w->a));
    return 0;
}

int
nb_archive_add_mem(nb_archive_writer_t *w, const char *name, const void *data,
                   size_t len, char sha_hex[NB_SHA256_HEX], err_t *err)
{
    if (s_begin_entry(w, name, len, err) || s_write(w, name, data, len, err))
        return -1;
    if (sha_hex)
        nb_sha256_hex(data, len, sha_hex);
    return 0;
}

int
nb_archive_add_fd(nb_archive_writer_t *w, const char *name, int fd,
                  char sha_hex[NB_SHA256_HEX], uint64_t *size_out, err_t *err)
{
    int rc = -1;
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err_errno(err, ERR_IO, "cannot read %s", name);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, ERR_USAGE, "%s is not a regular file", name);
        goto out;
    }
    if (s_begin_entry(w, name, (uint64_t)st.st_size, err))
        goto out;
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    buf = xmalloc(CHUNK);
    uint64_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_errno(err, ERR_IO, "cannot read %s", name);
            goto out;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > (uint64_t)st.st_size) {
            err_set(err, ERR_IO, "%s grew while it was being archived", name);
            goto out;
        }
        crypto_hash_sha256_update(&h, (unsigned char *)buf, (size_t)n);
        if (s_write(w, name, buf, (size_t)n, err))
            goto out;
    }
    if (total != (uint64_t)st.st_size) {
        err_set(err, ERR_IO, "%s shrank while it was being archived", name);
        goto out;
    }
    unsigned char d[NB_SHA256_BYTES];
    crypto_hash_sha256_final(&h, d);
    if (sha_hex)
        sodium_bin2hex(sha_hex, NB_SHA256_HEX, d, sizeof d);
    if (size_out)
        *size_out = total;
    rc = 0;
out:
    free(buf);
    return rc;
}

int
nb_archive_add_file(nb_archive_writer_t *w, const char *name,
                    const char *host_path, char sha_hex[NB_SHA256_HEX],
                    uint64_t *size_out, err_t *err)
{
    int fd = open(host_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_errno(err, ERR_USAGE, "cannot read %s", host_path);
    int rc = nb_archive_add_fd(w, name, fd, sha_hex, size_out, err);
    close(fd);
    return rc;
}

int
nb_archive_writer_commit(nb_archive_writer_t **pw, err_t *err)
{
    nb_archive_writer_t *w = *pw;
    int rc = -1;
    if (archive_write_close(w->a) != ARCHIVE_OK) {
        err_set(err, ERR_IO, "cannot finish %s: %s", w->path,
                archive_error_string(w->a));
        goto out;
    }
    if (fsync(w->fd) != 0 || fchmod(w->fd, 0644) != 0) {
        err_errno(err, ERR_IO, "cannot write %s", w->path);
        goto out;
    }
    /* Again at the rename: what is there now is what gets replaced. */
    if (file_check_output(w->path, NULL, err))
        goto out;
    if (rename(w->tmp, w->path) != 0) {
        err_errno(err, ERR_IO, "cannot write %s", w->path);
        goto out;
    }
    free(w->tmp);
    w->tmp = NULL; /* nothing left to remove */
    rc = 0;
out:
    nb_archive_writer_destroy(pw);
    return rc;
}

void
nb_archive_writer_destroy(nb_archive_writer_t **pw)
{
    nb_archive_writer_t *w = pw ? *pw : NULL;
    if (!w)
        return;
    if (w->a)
        archive_write_free(w->a);
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    json_decref(w->names);
    free(w);
    *pw = NULL;
}

/* ---- reading ------------------------------------------------------------ */

void
nb_archive_limits_init(nb_archive_limits_t *l)
{
    l->max_entries = 100000;
    l->max_total_bytes = (uint64_t)64 << 30;
    l->max_ratio = 200;
    l->max_kept_bytes = (size_t)256 << 20;
    l->admit = NULL;
    l->keep = NULL;
    l->ctx = NULL;
}

/* Create the directories of `name` below `root` without following any
 * symlink and open the file O_EXCL. The fd, or -1 with err set. */
static int
s_create_below(int root, const char *name, err_t *err)
{
    char *path = xstrdup(name);
    int dir = dup(root), fd = -1;
    char *c = path;
    for (char *slash; (slash = strchr(c, '/')); c = slash + 1) {
        *slash = '\0';
        if (mkdirat(dir, c, 0700) != 0 && errno != EEXIST)
            goto fail;
        int next =
            openat(dir, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            goto fail;
        close(dir);
        dir = next;
    }
    fd = openat(dir, c, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd < 0)
        goto fail;
    close(dir);
    free(path);
    return fd;
fail:
    err_errno(err, ERR_IO, "cannot extract %s", name);
    close(dir);
    free(path);
    return -1;
}

static int
s_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static const char *
s_type_name(mode_t t)
{
    switch (t) {
    case AE_IFLNK:
        return "a symlink";
    case AE_IFCHR:
    case AE_IFBLK:
        return "a device";
    case AE_IFIFO:
        return "a FIFO";
    case AE_IFSOCK:
        return "a socket";
    default:
        return "not a regular file";
    }
}

/* Read one entry's content: hash it, keep it or extract it. */
static int
s_read_entry(struct archive *a, nb_archive_t *ar, nb_archive_file_t *f,
             size_t keep, int extract_dirfd, const nb_archive_limits_t *lim,
             char *buf, err_t *err)
{
    int fd = -1, rc = -1;
    size_t cap = 0;
    if (!keep && extract_dirfd >= 0) {
        fd = s_create_below(extract_dirfd, f->name, err);
        if (fd < 0)
            return -1;
    }
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, CHUNK);
        if (n < 0) {
            err_set(err, ERR_VERIFY, "%s is damaged or truncated: %s", f->name,
                    archive_error_string(a));
            goto out;
        }
        if (n == 0)
            break;
        f->size += (uint64_t)n;
        ar->content_bytes += (uint64_t)n;
        if (ar->content_bytes > lim->max_total_bytes) {
            err_set(err, ERR_VERIFY,
                    "the archive holds more than %llu bytes (at %s); refused",
                    (unsigned long long)lim->max_total_bytes, f->name);
            goto out;
        }
        if (ar->content_bytes > (1 << 20) &&
            ar->content_bytes / lim->max_ratio > ar->archive_bytes) {
            err_set(err, ERR_VERIFY,
                    "the archive expands more than %llu times its size (at "
                    "%s): a zip bomb? refused",
                    (unsigned long long)lim->max_ratio, f->name);
            goto out;
        }
        crypto_hash_sha256_update(&h, (unsigned char *)buf, (size_t)n);
        if (keep) {
            if (f->size > keep) {
                err_set(err, ERR_VERIFY,
                        "%s is larger than %zu bytes, the most kept in "
                        "memory for it; refused",
                        f->name, keep);
                goto out;
            }
            if (f->size + 1 > cap) {
                cap = cap ? cap * 2 : CHUNK;
                while (cap < f->size + 1)
                    cap *= 2;
                f->data = xrealloc(f->data, cap);
            }
            memcpy(f->data + f->size - (size_t)n, buf, (size_t)n);
        } else if (fd >= 0 && s_write_all(fd, buf, (size_t)n) != 0) {
            err_errno(err, ERR_IO, "cannot extract %s", f->name);
            goto out;
        }
    }
    if (keep) {
        if (!f->data)
            f->data = xmalloc(1);
        f->data[f->size] = '\0';
    }
    unsigned char d[NB_SHA256_BYTES];
    crypto_hash_sha256_final(&h, d);
    sodium_bin2hex(f->sha256, NB_SHA256_HEX, d, sizeof d);
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The next entry. libarchive warns (ARCHIVE_WARN) when a UTF-8 name has
 * no form in the C locale we run in; the UTF-8 name is what we read (and
 * check by our own rules), so that is no failure. */
static int
s_next_header(struct archive *a, struct archive_entry **e)
{
    int rc = archive_read_next_header(a, e);
    if (rc == ARCHIVE_WARN && archive_entry_pathname_utf8(*e))
        return ARCHIVE_OK;
    return rc;
}

/* The one pass over an opened archive `a` (taken) of `size` bytes, named
 * `origin` in messages. */
static nb_archive_t *
s_read(struct archive *a, uint64_t size, const char *origin, int extract_dirfd,
       const nb_archive_limits_t *lim_in, err_t *err)
{
    nb_archive_limits_t lim;
    if (lim_in)
        lim = *lim_in;
    else
        nb_archive_limits_init(&lim);
    nb_archive_t *ar = xcalloc(1, sizeof *ar);
    ar->archive_bytes = size;
    json_t *seen = json_object();
    char *buf = xmalloc(CHUNK);
    size_t cap = 0;
    const char *path = origin;
    locale_t old_locale = s_locale_begin();
    for (;;) {
        struct archive_entry *e;
        int rc = s_next_header(a, &e);
        if (rc == ARCHIVE_EOF)
            break;
        if (rc != ARCHIVE_OK) {
            err_set(err, ERR_VERIFY, "%s is damaged or truncated: %s", path,
                    archive_error_string(a));
            goto fail;
        }
        const char *name = archive_entry_pathname_utf8(e);
        if (!name)
            name = archive_entry_pathname(e);
        if (!name) {
            err_set(err, ERR_VERIFY, "an entry of %s has no readable name",
                    path);
            goto fail;
        }
        if (json_object_size(seen) >= lim.max_entries) {
            err_set(err, ERR_VERIFY, "%s has more than %zu entries; refused",
                    path, lim.max_entries);
            goto fail;
        }
        mode_t type = archive_entry_filetype(e);
        /* Directory entries carry a trailing slash; check the rest. */
        char *clean = xstrdup(name);
        size_t n = strlen(clean);
        if (type == AE_IFDIR && n > 1 && clean[n - 1] == '/')
            clean[n - 1] = '\0';
        if (nb_archive_name_check(clean, err)) {
            free(clean);
            goto fail;
        }
        if (json_object_get(seen, clean)) {
            err_set(err, ERR_VERIFY, "entry '%s' occurs twice; refused", clean);
            free(clean);
            goto fail;
        }
        json_object_set_new(seen, clean, json_true());
        if (type == AE_IFDIR) {
            free(clean);
            continue;
        }
        if (type != AE_IFREG || archive_entry_hardlink(e)) {
            err_set(err, ERR_VERIFY, "entry '%s' is %s; refused", clean,
                    archive_entry_hardlink(e) ? "a hard link"
                                              : s_type_name(type));
            free(clean);
            goto fail;
        }
        if (ar->nfiles == cap) {
            cap = cap ? cap * 2 : 16;
            ar->files = xrealloc(ar->files, cap * sizeof *ar->files);
        }
        if (lim.admit && lim.admit(lim.ctx, clean, err)) {
            free(clean);
            goto fail;
        }
        nb_archive_file_t *f = &ar->files[ar->nfiles++];
        memset(f, 0, sizeof *f);
        f->name = clean;
        size_t keep = 0;
        if (strchr(clean, '/') == NULL)
            keep = lim.keep ? lim.keep(lim.ctx, clean) : lim.max_kept_bytes;
        if (s_read_entry(a, ar, f, keep, extract_dirfd, &lim, buf, err))
            goto fail;
    }
    goto out;
fail:
    nb_archive_destroy(&ar);
out:
    s_locale_end(old_locale);
    archive_read_free(a);
    free(buf);
    json_decref(seen);
    return ar;
}

/* `path` opened as a zip (fd in *fd_out, to close after the archive),
 * its size in *size. NULL with err set. */
static struct archive *
s_open_path(const char *path, int *fd_out, uint64_t *size, err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        err_errno(err, ERR_USAGE, "cannot open %s", path);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, ERR_USAGE, "%s is not a regular file", path);
        close(fd);
        return NULL;
    }
    struct archive *a = archive_read_new();
    archive_read_support_format_zip(a);
    if (archive_read_open_fd(a, fd, CHUNK) != ARCHIVE_OK) {
        err_set(err, ERR_VERIFY, "%s is not a zip archive: %s", path,
                archive_error_string(a));
        archive_read_free(a);
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return a;
}

nb_archive_t *
nb_archive_read(const char *path, int extract_dirfd,
                const nb_archive_limits_t *lim, err_t *err)
{
    int fd = -1;
    uint64_t size = 0;
    struct archive *a = s_open_path(path, &fd, &size, err);
    if (!a)
        return NULL;
    nb_archive_t *ar = s_read(a, size, path, extract_dirfd, lim, err);
    close(fd);
    return ar;
}

char *
nb_archive_read_one(const char *path, const char *name, size_t max,
                    const nb_archive_limits_t *lim_in, size_t *len, err_t *err)
{
    nb_archive_limits_t lim;
    if (lim_in)
        lim = *lim_in;
    else
        nb_archive_limits_init(&lim);
    int fd = -1;
    uint64_t size = 0;
    struct archive *a = s_open_path(path, &fd, &size, err);
    if (!a)
        return NULL;
    char *data = NULL;
    size_t n = 0, cap = 0;
    locale_t old_locale = s_locale_begin();
    for (size_t entries = 0;; entries++) {
        struct archive_entry *e;
        int rc = s_next_header(a, &e);
        if (rc == ARCHIVE_EOF) {
            err_set(err, ERR_VERIFY, "%s is missing from the archive", name);
            break;
        }
        if (rc != ARCHIVE_OK) {
            err_set(err, ERR_VERIFY, "%s is damaged or truncated: %s", path,
                    archive_error_string(a));
            break;
        }
        if (entries >= lim.max_entries) {
            err_set(err, ERR_VERIFY, "%s has more than %zu entries; refused",
                    path, lim.max_entries);
            break;
        }
        const char *en = archive_entry_pathname_utf8(e);
        if (!en)
            en = archive_entry_pathname(e);
        if (!en || strcmp(en, name) != 0 ||
            archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e))
            continue; /* its content is skipped unread */
        data = xmalloc(CHUNK);
        cap = CHUNK;
        bool failed = false;
        for (;;) {
            if (n + CHUNK + 1 > cap) {
                cap *= 2;
                data = xrealloc(data, cap);
            }
            la_ssize_t r = archive_read_data(a, data + n, CHUNK);
            if (r < 0) {
                failed = true;
                err_set(err, ERR_VERIFY, "%s is damaged or truncated: %s", name,
                        archive_error_string(a));
                break;
            }
            if (r == 0)
                break;
            n += (size_t)r;
            if (n > max) {
                failed = true;
                err_set(err, ERR_VERIFY, "%s is larger than %zu bytes; refused",
                        name, max);
                break;
            }
        }
        if (failed) {
            free(data);
            data = NULL;
        } else {
            data[n] = '\0';
            *len = n;
        }
        break;
    }
    s_locale_end(old_locale);
    archive_read_free(a);
    close(fd);
    return data;
}

nb_archive_t *
nb_archive_read_mem(const void *data, size_t len,
                    const nb_archive_limits_t *lim, err_t *err)
{
    struct archive *a = archive_read_new();
    archive_read_support_format_zip(a);
    if (archive_read_open_memory(a, data, len) != ARCHIVE_OK) {
        err_set(err, ERR_VERIFY, "not a zip archive: %s",
                archive_error_string(a));
        archive_read_free(a);
        return NULL;
    }
    return s_read(a, len, "the archive", -1, lim, err);
}

void
nb_archive_destroy(nb_archive_t **p)
{
    nb_archive_t *a = p ? *p : NULL;
    if (!a)
        return;
    for (size_t i = 0; i < a->nfiles; i++) {
        free(a->files[i].name);
        free(a->files[i].data);
    }
    free(a->files);
    free(a);
    *p = NULL;
}

const nb_archive_file_t *
nb_archive_find(const nb_archive_t *a, const char *name)
{
    for (size_t i = 0; i < a->nfiles; i++)
        if (strcmp(a->files[i].name, name) == 0)
            return &a->files[i];
    return NULL;
}
