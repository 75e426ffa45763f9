/*
 * pk_manifest: signed wheel manifests. See pk_manifest.h for the formats and
 * the order of checks.
 */
#include "packages/pk_manifest.h"

#include "common/buf.h"
#include "common/fileio.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SIG_FILE_MAX 4096
#define HASH_HEX (crypto_hash_sha256_BYTES * 2)
#define IO_CHUNK 65536

struct pk_manifest {
    pk_manifest_entry_t *entries; /* owned array of n; strings owned too */
    size_t n;                     /* entries in use */
    char *signer;                 /* owned "signer" field */
    char *created;                /* owned "created" field */
    char *dir;                    /* owned path it was loaded from, or NULL */
    int dirfd;             /* -1, or the O_DIRECTORY fd entries open under */
    int has_signer;        /* 1 when signed_by is set */
    pk_pubkey_t signed_by; /* the trusted key that verified the signature */
};

/* --- helpers ------------------------------------------------------------ */

/* Copy untrusted text into out[cap] for a message: printable ASCII only,
 * others as '?', cut at 80 bytes with "...". */
static const char *
s_quote(const char *s, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 4 < cap; i++) {
        if (i >= 80) {
            memcpy(out + j, "...", 3);
            j += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        out[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[j] = '\0';
    return out;
}

static int
s_is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9');
}

/* 1 if s is non-empty and every byte is alnum or in `extra`. */
static int
s_charset(const char *s, size_t n, const char *extra)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!s_is_alnum(s[i]) && !strchr(extra, s[i]))
            return 0;
    return 1;
}

static int
s_printable(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return 0;
    return 1;
}

static pk_manifest_t *
s_manifest_new(void)
{
    pk_manifest_t *m = xcalloc(1, sizeof *m);
    m->dirfd = -1;
    return m;
}

void
pk_manifest_destroy(pk_manifest_t **p)
{
    if (!p || !*p)
        return;
    pk_manifest_t *m = *p;
    for (size_t i = 0; i < m->n; i++) {
        pk_manifest_entry_t *e = &m->entries[i];
        free((char *)e->name);
        free((char *)e->version);
        free((char *)e->filename);
        free((char *)e->sha256);
        if (e->fd >= 0)
            close(e->fd);
    }
    free(m->entries);
    free(m->signer);
    free(m->created);
    free(m->dir);
    if (m->dirfd >= 0)
        close(m->dirfd);
    free(m);
    *p = NULL;
}

size_t
pk_manifest_count(const pk_manifest_t *m)
{
    return m->n;
}

const pk_manifest_entry_t *
pk_manifest_entry(const pk_manifest_t *m, size_t i)
{
    return i < m->n ? &m->entries[i] : NULL;
}

const char *
pk_manifest_signer(const pk_manifest_t *m)
{
    return m->signer;
}

const char *
pk_manifest_created(const pk_manifest_t *m)
{
    return m->created;
}

const pk_pubkey_t *
pk_manifest_signed_by(const pk_manifest_t *m)
{
    return m->has_signer ? &m->signed_by : NULL;
}

const char *
pk_manifest_dir(const pk_manifest_t *m)
{
    return m->dir;
}

/* --- names -------------------------------------------------------------- */

char *
pk_manifest_normalize_name(const char *name)
{
    size_t n = strlen(name), j = 0;
    char *out = xmalloc(n + 1);
    int in_sep = 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c == '-' || c == '_' || c == '.') {
            if (!in_sep)
                out[j++] = '-';
            in_sep = 1;
            continue;
        }
        in_sep = 0;
        out[j++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    out[j] = '\0';
    return out;
}

int
pk_manifest_check_filename(const char *filename, err_t *err)
{
    char q[96];
    size_t n = strlen(filename);
    if (n == 0)
        return err_set(err, ERR_VERIFY, "empty filename");
    s_quote(filename, q, sizeof q);
    if (filename[0] == '/')
        return err_set(err, ERR_VERIFY,
                       "filename '%s' is an absolute path; entries must be "
                       "plain file names inside the package directory",
                       q);
    if (strchr(filename, '/'))
        return err_set(
            err, ERR_VERIFY,
            "filename '%s' contains '/'%s; entries must be plain "
            "file names inside the package directory",
            q, strstr(filename, "..") ? " and escapes the directory" : "");
    if (strcmp(filename, ".") == 0 || strcmp(filename, "..") == 0)
        return err_set(err, ERR_VERIFY,
                       "filename '%s' names a directory, not a file", q);
    if (filename[0] == '.')
        return err_set(err, ERR_VERIFY,
                       "filename '%s' is hidden (starts with '.'); entries "
                       "must be visible wheel files",
                       q);
    if (n > 255)
        return err_set(err, ERR_VERIFY,
                       "filename '%s' is longer than 255 bytes", q);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)filename[i];
        if (c < 0x20 || c >= 0x7f || c == '\\')
            return err_set(err, ERR_VERIFY,
                           "filename '%s' contains a control, non-ASCII or "
                           "backslash byte",
                           q);
    }
    return 0;
}

int
pk_manifest_parse_wheel_filename(const char *filename, char **name,
                                 char **version, err_t *err)
{
    char q[96];
    const char *why = NULL;
    if (pk_manifest_check_filename(filename, err))
        return -1;
    s_quote(filename, q, sizeof q);
    size_t n = strlen(filename);
    if (n <= 4 || strcmp(filename + n - 4, ".whl") != 0)
        return err_set(err, ERR_VERIFY,
                       "'%s' is not a wheel (only *.whl files are supported)",
                       q);
    /* Split the stem on '-' into 5 or 6 parts. */
    const char *part[7];
    size_t plen[7];
    size_t np = 0;
    const char *p = filename, *end = filename + n - 4;
    while (p <= end && np < 7) {
        const char *dash = memchr(p, '-', (size_t)(end - p));
        const char *stop = dash ? dash : end;
        part[np] = p;
        plen[np] = (size_t)(stop - p);
        np++;
        if (!dash)
            break;
        p = dash + 1;
    }
    if (np != 5 && np != 6) {
        why = "expected {distribution}-{version}(-{build})?-{python}-{abi}-"
              "{platform}.whl";
        goto bad;
    }
    if (!s_charset(part[0], plen[0], "._") || !s_is_alnum(part[0][0]) ||
        !s_is_alnum(part[0][plen[0] - 1])) {
        why = "the distribution name must be letters, digits and ._ "
              "starting and ending with a letter or digit";
        goto bad;
    }
    if (!s_charset(part[1], plen[1], ".+!_") || !s_is_alnum(part[1][0])) {
        why = "the version must be letters, digits and .+!_ starting with a "
              "letter or digit";
        goto bad;
    }
    if (np == 6 && (!s_charset(part[2], plen[2], "._") ||
                    !(part[2][0] >= '0' && part[2][0] <= '9'))) {
        why = "the build tag must start with a digit";
        goto bad;
    }
    for (size_t i = np - 3; i < np; i++)
        if (!s_charset(part[i], plen[i], "._")) {
            why = "the python, abi and platform tags must be letters, digits "
                  "and ._";
            goto bad;
        }
    if (name) {
        char *raw = xstrndup(part[0], plen[0]);
        *name = pk_manifest_normalize_name(raw);
        free(raw);
    }
    if (version)
        *version = xstrndup(part[1], plen[1]);
    return 0;
bad:
    return err_set(err, ERR_VERIFY, "'%s' is not a valid wheel filename: %s", q,
                   why);
}

/* Lowercased "name-version-rest" identity of a wheel, to catch two
 * spellings of the same wheel. New string. */
static char *
s_wheel_key(const char *filename, const char *name, const char *version)
{
    const char *rest = strchr(filename, '-');
    rest = rest ? strchr(rest + 1, '-') : NULL;
    char *key = xasprintf("%s %s %s", name, version, rest ? rest : "");
    for (char *c = key; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return key;
}

/* --- parse -------------------------------------------------------------- */

static int
s_is_hex64(const char *s)
{
    if (strlen(s) != HASH_HEX)
        return 0;
    for (size_t i = 0; i < HASH_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* Borrowed string member, or NULL if absent / not a string / has a NUL. */
static const char *
s_get_str(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        return NULL;
    return s;
}

static int
s_parse_entry(json_t *obj, size_t idx, pk_manifest_entry_t *e, err_t *err)
{
    char q[96];
    char *name = NULL, *version = NULL;
    int rc = -1;
    if (!json_is_object(obj))
        return err_set(err, ERR_VERIFY, "files[%zu] is not an object", idx);
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val)
    {
        if (strcmp(key, "name") && strcmp(key, "version") &&
            strcmp(key, "filename") && strcmp(key, "size") &&
            strcmp(key, "sha256"))
            return err_set(err, ERR_VERIFY, "files[%zu] has unknown field '%s'",
                           idx, s_quote(key, q, sizeof q));
    }
    const char *filename = s_get_str(obj, "filename");
    if (!filename)
        return err_set(err, ERR_VERIFY,
                       "files[%zu] has no string field 'filename'", idx);
    if (pk_manifest_parse_wheel_filename(filename, &name, &version, err)) {
        err_prefix(err, "files[%zu]", idx);
        goto out;
    }
    const char *jname = s_get_str(obj, "name");
    const char *jver = s_get_str(obj, "version");
    const char *sha = s_get_str(obj, "sha256");
    json_t *size = json_object_get(obj, "size");
    if (!jname || strcmp(jname, name) != 0) {
        err_set(err, ERR_VERIFY,
                "files[%zu] (%s): 'name' must be the normalized project name "
                "'%s' from the filename",
                idx, filename, name);
        goto out;
    }
    if (!jver || strcmp(jver, version) != 0) {
        err_set(err, ERR_VERIFY,
                "files[%zu] (%s): 'version' must be '%s' as in the filename",
                idx, filename, version);
        goto out;
    }
    if (!json_is_integer(size) || json_integer_value(size) < 0) {
        err_set(err, ERR_VERIFY,
                "files[%zu] (%s): 'size' must be a non-negative integer", idx,
                filename);
        goto out;
    }
    if (!sha || !s_is_hex64(sha)) {
        err_set(err, ERR_VERIFY,
                "files[%zu] (%s): 'sha256' must be 64 lowercase hex digits",
                idx, filename);
        goto out;
    }
    e->name = name;
    e->version = version;
    name = version = NULL;
    e->filename = xstrdup(filename);
    e->size = (uint64_t)json_integer_value(size);
    e->sha256 = xstrdup(sha);
    e->fd = -1;
    rc = 0;
out:
    free(name);
    free(version);
    return rc;
}

struct dup_key {
    char *key;      /* owned s_wheel_key() or filename */
    const char *fn; /* borrowed filename, for messages */
};

static int
s_cmp_dup(const void *a, const void *b)
{
    return strcmp(((const struct dup_key *)a)->key,
                  ((const struct dup_key *)b)->key);
}

/* Refuse two entries with the same wheel identity. */
static int
s_check_duplicates(const pk_manifest_t *m, err_t *err)
{
    int rc = 0;
    if (m->n < 2)
        return 0;
    struct dup_key *k = xcalloc(m->n, sizeof *k);
    for (size_t i = 0; i < m->n; i++) {
        const pk_manifest_entry_t *e = &m->entries[i];
        k[i].key = s_wheel_key(e->filename, e->name, e->version);
        k[i].fn = e->filename;
    }
    qsort(k, m->n, sizeof *k, s_cmp_dup);
    for (size_t i = 1; i < m->n && rc == 0; i++) {
        if (strcmp(k[i - 1].key, k[i].key) != 0)
            continue;
        if (strcmp(k[i - 1].fn, k[i].fn) == 0)
            rc = err_set(err, ERR_VERIFY,
                         "duplicate entry for %s; each wheel may be listed "
                         "once",
                         k[i].fn);
        else
            rc = err_set(err, ERR_VERIFY,
                         "duplicate entries %s and %s name the same wheel; "
                         "each wheel may be listed once",
                         k[i - 1].fn, k[i].fn);
    }
    for (size_t i = 0; i < m->n; i++)
        free(k[i].key);
    free(k);
    return rc;
}

pk_manifest_t *
pk_manifest_parse(const char *json, size_t len, err_t *err)
{
    pk_manifest_t *m = NULL;
    json_t *root = NULL;
    json_error_t je;
    char q[96];

    if (len > PK_MANIFEST_MAX_BYTES) {
        err_set(err, ERR_VERIFY, "manifest is larger than %u bytes",
                PK_MANIFEST_MAX_BYTES);
        goto fail;
    }
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        err_set(err, ERR_VERIFY,
                "manifest is not valid JSON: %s (line %d, column %d)", je.text,
                je.line, je.column);
        goto fail;
    }
    if (!json_is_object(root)) {
        err_set(err, ERR_VERIFY, "manifest is not a JSON object");
        goto fail;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "format") && strcmp(key, "signer") &&
            strcmp(key, "created") && strcmp(key, "files")) {
            err_set(err, ERR_VERIFY, "manifest has unknown field '%s'",
                    s_quote(key, q, sizeof q));
            goto fail;
        }
    }
    const char *format = s_get_str(root, "format");
    if (!format || strcmp(format, PK_MANIFEST_FORMAT) != 0) {
        err_set(err, ERR_VERIFY,
                "manifest 'format' is '%s', expected '" PK_MANIFEST_FORMAT "'",
                format ? s_quote(format, q, sizeof q) : "(missing)");
        goto fail;
    }
    const char *signer = s_get_str(root, "signer");
    const char *created = s_get_str(root, "created");
    if (!signer || !s_printable(signer, 128)) {
        err_set(err, ERR_VERIFY,
                "manifest 'signer' must be 1-128 printable ASCII bytes");
        goto fail;
    }
    if (!created || !s_printable(created, 64)) {
        err_set(err, ERR_VERIFY,
                "manifest 'created' must be 1-64 printable ASCII bytes");
        goto fail;
    }
    json_t *files = json_object_get(root, "files");
    if (!json_is_array(files)) {
        err_set(err, ERR_VERIFY, "manifest 'files' must be an array");
        goto fail;
    }
    size_t nfiles = json_array_size(files);
    if (nfiles > PK_MANIFEST_MAX_FILES) {
        err_set(err, ERR_VERIFY, "manifest lists more than %d files",
                PK_MANIFEST_MAX_FILES);
        goto fail;
    }
    m = s_manifest_new();
    m->signer = xstrdup(signer);
    m->created = xstrdup(created);
    m->entries = xcalloc(nfiles ? nfiles : 1, sizeof *m->entries);
    for (size_t i = 0; i < nfiles; i++) {
        if (s_parse_entry(json_array_get(files, i), i, &m->entries[i], err))
            goto fail;
        m->n++;
    }
    if (s_check_duplicates(m, err))
        goto fail;
    json_decref(root);
    return m;
fail:
    json_decref(root);
    pk_manifest_destroy(&m);
    return NULL;
}

/* --- file helpers ------------------------------------------------------- */

/* Hash the first bytes of fd with pread from offset 0, reading at most
 * limit + 1 bytes (so growth is noticed). */
static int
s_hash_fd(int fd, uint64_t limit, unsigned char out[crypto_hash_sha256_BYTES],
          uint64_t *nread)
{
    crypto_hash_sha256_state st;
    unsigned char *chunk = xmalloc(IO_CHUNK);
    uint64_t off = 0;
    int rc = 0;
    crypto_hash_sha256_init(&st);
    while (off <= limit) {
        ssize_t n = pread(fd, chunk, IO_CHUNK, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        crypto_hash_sha256_update(&st, chunk, (size_t)n);
        off += (uint64_t)n;
    }
    crypto_hash_sha256_final(&st, out);
    free(chunk);
    *nread = off;
    return rc;
}

/* Read a small regular file under dirfd (no symlinks) into a new buffer.
 * *missing is set to 1 when the file does not exist. */
static int
s_read_small(int dirfd, const char *dir, const char *name, size_t cap,
             char **data, size_t *len, int *missing, err_t *err)
{
    int rc = -1;
    char *buf = NULL;
    *missing = 0;
    int fd = openat(dirfd, name,
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        *missing = errno == ENOENT;
        if (errno == ENOENT)
            return err_set(err, ERR_VERIFY, "%s/%s is missing", dir, name);
        if (errno == ELOOP)
            return err_set(err, ERR_VERIFY,
                           "%s/%s is a symlink; it must be a regular file", dir,
                           name);
        return err_set(err, ERR_VERIFY, "cannot open %s/%s: %s", dir, name,
                       strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(err, ERR_VERIFY, "%s/%s is not a regular file", dir, name);
        goto out;
    }
    if ((uint64_t)st.st_size > cap) {
        err_set(err, ERR_VERIFY, "%s/%s is larger than %zu bytes", dir, name,
                cap);
        goto out;
    }
    buf = xmalloc(cap + 1);
    size_t got = 0;
    while (got <= cap) {
        ssize_t n = read(fd, buf + got, cap + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_set(err, ERR_VERIFY, "cannot read %s/%s: %s", dir, name,
                    strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got > cap) {
        err_set(err, ERR_VERIFY, "%s/%s is larger than %zu bytes", dir, name,
                cap);
        goto out;
    }
    buf[got] = '\0';
    *data = buf;
    *len = got;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

/* Write name under dirfd atomically (see common/fileio.h). */
static int
s_replace_at(int dirfd, const char *dir, const char *name, const char *data,
             size_t len, err_t *err)
{
    char *what = xasprintf("%s/%s", dir, name);
    int rc = file_write_atomic_at(dirfd, name, data, len, 0644, what, err);
    free(what);
    return rc;
}

/* --- sign --------------------------------------------------------------- */

/* Wheels sorted case-insensitively (so "Other.Lib" sorts among the o's),
 * ties broken bytewise for a total order. */
static int
s_cmp_str(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int c = strcasecmp(x, y);
    return c ? c : strcmp(x, y);
}

/* List the wheels of dirfd, refusing anything else. Sorted, new strings. */
static int
s_list_wheels(int dirfd, const char *dir, char ***out, size_t *count,
              err_t *err)
{
    int rc = -1;
    char **names = NULL;
    size_t n = 0;
    char q[96];
    int dfd = dup(dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return err_set(err, ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (nm[0] == '.' || strcmp(nm, PK_MANIFEST_JSON) == 0 ||
            strcmp(nm, PK_MANIFEST_SIG) == 0)
            continue;
        s_quote(nm, q, sizeof q);
        struct stat st;
        if (fstatat(dirfd, nm, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            err_set(err, ERR_IO, "cannot stat %s/%s: %s", dir, q,
                    strerror(errno));
            goto out;
        }
        if (S_ISLNK(st.st_mode)) {
            err_set(err, ERR_USAGE,
                    "%s/%s is a symlink; copy the wheel itself into %s "
                    "(only regular files are signed)",
                    dir, q, dir);
            goto out;
        }
        if (S_ISDIR(st.st_mode)) {
            err_set(err, ERR_USAGE,
                    "%s/%s is a directory; the package directory must hold "
                    "only wheels",
                    dir, q);
            goto out;
        }
        if (!S_ISREG(st.st_mode)) {
            err_set(err, ERR_USAGE, "%s/%s is not a regular file", dir, q);
            goto out;
        }
        err_t perr;
        err_clear(&perr);
        if (pk_manifest_parse_wheel_filename(nm, NULL, NULL, &perr)) {
            err_set(err, ERR_USAGE,
                    "%s/%s: %s; only wheels can be signed, so move it out of "
                    "%s",
                    dir, q, perr.text, dir);
            goto out;
        }
        if (n >= PK_MANIFEST_MAX_FILES) {
            err_set(err, ERR_USAGE, "%s holds more than %d wheels", dir,
                    PK_MANIFEST_MAX_FILES);
            goto out;
        }
        names = xrealloc(names, (n + 1) * sizeof *names);
        names[n++] = xstrdup(nm);
    }
    if (n == 0) {
        err_set(err, ERR_USAGE, "%s holds no wheels (*.whl) to sign", dir);
        goto out;
    }
    qsort(names, n, sizeof *names, s_cmp_str);
    *out = names;
    *count = n;
    names = NULL;
    n = 0;
    rc = 0;
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

/* Hash one wheel of the directory being signed into entry e. */
static int
s_hash_wheel(int dirfd, const char *dir, const char *fn, pk_manifest_entry_t *e,
             err_t *err)
{
    int rc = -1;
    char *name = NULL, *version = NULL;
    int fd = openat(dirfd, fn,
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return err_set(err, ERR_IO, "cannot open %s/%s: %s", dir, fn,
                       strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(err, ERR_USAGE, "%s/%s is not a regular file", dir, fn);
        goto out;
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    uint64_t got = 0;
    if (s_hash_fd(fd, (uint64_t)st.st_size, h, &got) != 0) {
        err_set(err, ERR_IO, "cannot read %s/%s: %s", dir, fn, strerror(errno));
        goto out;
    }
    if (got != (uint64_t)st.st_size) {
        err_set(err, ERR_IO, "%s/%s changed while it was being hashed", dir,
                fn);
        goto out;
    }
    if (pk_manifest_parse_wheel_filename(fn, &name, &version, err))
        goto out;
    char hex[HASH_HEX + 1];
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    e->name = name;
    e->version = version;
    name = version = NULL;
    e->filename = xstrdup(fn);
    e->size = got;
    e->sha256 = xstrdup(hex);
    e->fd = -1;
    rc = 0;
out:
    free(name);
    free(version);
    close(fd);
    return rc;
}

/* manifest.json bytes for m (new string, ends in '\n'). */
static char *
s_serialize(const pk_manifest_t *m, size_t *len)
{
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string(PK_MANIFEST_FORMAT));
    json_object_set_new(root, "signer", json_string(m->signer));
    json_object_set_new(root, "created", json_string(m->created));
    json_t *files = json_array();
    for (size_t i = 0; i < m->n; i++) {
        const pk_manifest_entry_t *e = &m->entries[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(e->name));
        json_object_set_new(o, "version", json_string(e->version));
        json_object_set_new(o, "filename", json_string(e->filename));
        json_object_set_new(o, "size", json_integer((json_int_t)e->size));
        json_object_set_new(o, "sha256", json_string(e->sha256));
        json_array_append_new(files, o);
    }
    json_object_set_new(root, "files", files);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    char *out = xasprintf("%s\n", text);
    free(text);
    *len = strlen(out);
    return out;
}

pk_manifest_t *
pk_manifest_sign_dir(const char *dir, const pk_seckey_t *key, err_t *err)
{
    pk_manifest_t *m = NULL;
    char **names = NULL;
    size_t nnames = 0;
    char *json = NULL, *sigtext = NULL, *pubstr = NULL;
    size_t jlen = 0;
    int dirfd = -1;

    if (pk_key_sodium_init(err))
        return NULL;
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        err_set(err, ERR_USAGE, "cannot open package directory %s: %s", dir,
                strerror(errno));
        goto fail;
    }
    if (s_list_wheels(dirfd, dir, &names, &nnames, err))
        goto fail;
    const pk_pubkey_t *pub = pk_seckey_public(key);
    m = s_manifest_new();
    m->signer = xstrdup(pub->id);
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    m->created = xstrdup(ts);
    m->entries = xcalloc(nnames, sizeof *m->entries);
    for (size_t i = 0; i < nnames; i++) {
        if (s_hash_wheel(dirfd, dir, names[i], &m->entries[i], err))
            goto fail;
        m->n++;
    }
    if (s_check_duplicates(m, err)) {
        if (err)
            err->code = ERR_USAGE;
        err_prefix(err, "%s", dir);
        goto fail;
    }
    json = s_serialize(m, &jlen);
    unsigned char sig[PK_KEY_SIG_BYTES];
    if (pk_seckey_sign(key, json, jlen, sig, err))
        goto fail;
    char sigb64[sodium_base64_ENCODED_LEN(PK_KEY_SIG_BYTES,
                                          sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(sigb64, sizeof sigb64, sig, sizeof sig,
                      sodium_base64_VARIANT_ORIGINAL);
    pubstr = pk_pubkey_format(pub);
    sigtext = xasprintf("format: " PK_MANIFEST_SIG_FORMAT "\n"
                        "key-id: %s\n"
                        "public-key: %s\n"
                        "signature: %s\n",
                        pub->id, pubstr, sigb64);
    if (s_replace_at(dirfd, dir, PK_MANIFEST_JSON, json, jlen, err) ||
        s_replace_at(dirfd, dir, PK_MANIFEST_SIG, sigtext, strlen(sigtext),
                     err))
        goto fail;
    m->dir = xstrdup(dir);
    m->has_signer = 1;
    m->signed_by = *pub;
    goto done;
fail:
    pk_manifest_destroy(&m);
done:
    for (size_t i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    free(json);
    free(sigtext);
    free(pubstr);
    if (dirfd >= 0)
        close(dirfd);
    return m;
}

/* --- verify ------------------------------------------------------------- */

/* Parse manifest.sig: the four "field: value" lines of pk_manifest.h. */
static int
s_parse_sig(const char *text, size_t len, pk_pubkey_t *key,
            unsigned char sig[PK_KEY_SIG_BYTES], err_t *err)
{
    static const char *const fields[4] = {
        "format: ", "key-id: ", "public-key: ", "signature: "};
    char line[4][512];
    const char *p = text, *end = text + len;
    if (strlen(text) != len)
        return err_set(err, ERR_VERIFY, "it contains a NUL byte");
    for (int i = 0; i < 4; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        size_t flen = strlen(fields[i]);
        if ((size_t)(stop - p) < flen || strncmp(p, fields[i], flen) != 0)
            return err_set(err, ERR_VERIFY, "line %d should start with '%s'",
                           i + 1, fields[i]);
        size_t vlen = (size_t)(stop - p) - flen;
        if (vlen >= sizeof line[i])
            return err_set(err, ERR_VERIFY, "line %d is too long", i + 1);
        memcpy(line[i], p + flen, vlen);
        line[i][vlen] = '\0';
        p = nl ? nl + 1 : end;
    }
    if (p != end)
        return err_set(err, ERR_VERIFY, "it has text after the 4th line");
    if (strcmp(line[0], PK_MANIFEST_SIG_FORMAT) != 0)
        return err_set(err, ERR_VERIFY, "format is not '%s'",
                       PK_MANIFEST_SIG_FORMAT);
    if (pk_pubkey_parse(key, line[2], err)) {
        if (err)
            err->code = ERR_VERIFY;
        return -1;
    }
    if (strcmp(line[1], key->id) != 0)
        return err_set(err, ERR_VERIFY,
                       "key-id does not match its public-key (expected %s)",
                       key->id);
    size_t got = 0;
    const char *b64end = NULL;
    size_t slen = strlen(line[3]);
    if (sodium_base642bin(sig, PK_KEY_SIG_BYTES, line[3], slen, NULL, &got,
                          &b64end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != PK_KEY_SIG_BYTES || b64end != line[3] + slen)
        return err_set(err, ERR_VERIFY,
                       "signature is not %d bytes of standard base64",
                       PK_KEY_SIG_BYTES);
    return 0;
}

/* Check the signature over json with the trust set; fills m->signed_by. */
static int
s_check_signature(pk_manifest_t *m, const pk_trust_t *trust, const char *json,
                  size_t jlen, const char *sigtext, size_t slen, err_t *err)
{
    const char *dir = m->dir;
    pk_pubkey_t hint;
    unsigned char sig[PK_KEY_SIG_BYTES];
    err_t perr;
    err_clear(&perr);
    if (s_parse_sig(sigtext, slen, &hint, sig, &perr))
        return err_set(err, ERR_VERIFY,
                       "%s/" PK_MANIFEST_SIG " is malformed: %s; re-sign "
                       "with 'jupyter-agent manifest sign --key KEY %s'",
                       dir, perr.text, dir);
    size_t nt = trust ? pk_trust_count(trust) : 0;
    if (nt == 0)
        return err_set(
            err, ERR_VERIFY,
            "no trusted keys, so %s/" PK_MANIFEST_JSON
            " (signed by key %s) cannot be verified; pass --trust "
            "KEY.pub, or put KEY.pub in $JUPYTER_AGENT_TRUSTED_KEYS, "
            "~/.config/jupyter-agent/trusted-keys/ or "
            "/etc/jupyter-agent/trusted-keys/",
            dir, hint.id);
    for (size_t i = 0; i < nt; i++) {
        const pk_pubkey_t *k = pk_trust_key(trust, i);
        if (pk_pubkey_verify(k, json, jlen, sig)) {
            m->signed_by = *k;
            m->has_signer = 1;
            return 0;
        }
    }
    const pk_pubkey_t *known = pk_trust_find(trust, hint.pk);
    char *trusted = pk_trust_describe(trust);
    if (known)
        err_set(err, ERR_VERIFY,
                "%s/" PK_MANIFEST_JSON " does not match its signature by "
                "trusted key %s%s%s: manifest.json was changed after signing "
                "(or manifest.sig belongs to another manifest); re-sign it",
                dir, known->id, known->label[0] ? " " : "", known->label);
    else if (pk_pubkey_verify(&hint, json, jlen, sig)) {
        char *pk = pk_pubkey_format(&hint);
        err_set(err, ERR_VERIFY,
                "%s/" PK_MANIFEST_JSON " is signed by key %s (%s), which is "
                "not trusted; trusted keys: %s. To trust it, pass --trust "
                "with that key or add its .pub file to a trusted-keys "
                "directory",
                dir, hint.id, pk, trusted);
        free(pk);
    } else
        err_set(err, ERR_VERIFY,
                "%s/" PK_MANIFEST_SIG " does not verify: manifest.json was "
                "changed after signing or the signature is corrupt, and its "
                "key %s is not trusted either; trusted keys: %s",
                dir, hint.id, trusted);
    free(trusted);
    return -1;
}

pk_manifest_t *
pk_manifest_load_signed(const char *dir, const pk_trust_t *trust, err_t *err)
{
    pk_manifest_t *m = NULL, *parsed = NULL;
    char *json = NULL, *sigtext = NULL;
    size_t jlen = 0, slen = 0;

    if (pk_key_sodium_init(err))
        return NULL;
    m = s_manifest_new();
    m->dir = xstrdup(dir);
    m->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (m->dirfd < 0) {
        err_set(err, ERR_USAGE, "cannot open package directory %s: %s", dir,
                strerror(errno));
        goto fail;
    }
    int missing = 0;
    if (s_read_small(m->dirfd, dir, PK_MANIFEST_SIG, SIG_FILE_MAX, &sigtext,
                     &slen, &missing, err)) {
        if (missing)
            err_set(err, ERR_VERIFY,
                    "%s/" PK_MANIFEST_SIG " is missing, so the manifest is "
                    "unsigned; sign it with 'jupyter-agent manifest sign "
                    "--key KEY %s'",
                    dir, dir);
        goto fail;
    }
    if (s_read_small(m->dirfd, dir, PK_MANIFEST_JSON, PK_MANIFEST_MAX_BYTES,
                     &json, &jlen, &missing, err))
        goto fail;
    if (s_check_signature(m, trust, json, jlen, sigtext, slen, err))
        goto fail;
    /* Only bytes that verified are parsed. */
    parsed = pk_manifest_parse(json, jlen, err);
    if (!parsed) {
        err_prefix(err, "%s/" PK_MANIFEST_JSON, dir);
        goto fail;
    }
    if (strcmp(parsed->signer, m->signed_by.id) != 0) {
        char q[96];
        err_set(err, ERR_VERIFY,
                "%s/" PK_MANIFEST_JSON " names signer '%s' but was signed by "
                "key %s; re-sign it",
                dir, s_quote(parsed->signer, q, sizeof q), m->signed_by.id);
        goto fail;
    }
    /* Move the parsed contents into m (which holds dir, dirfd, signer). */
    m->entries = parsed->entries;
    m->n = parsed->n;
    m->signer = parsed->signer;
    m->created = parsed->created;
    parsed->entries = NULL;
    parsed->n = 0;
    parsed->signer = parsed->created = NULL;
    pk_manifest_destroy(&parsed);
    free(json);
    free(sigtext);
    return m;
fail:
    pk_manifest_destroy(&parsed);
    pk_manifest_destroy(&m);
    free(json);
    free(sigtext);
    return NULL;
}

int
pk_manifest_verify_entry(pk_manifest_t *m, size_t i, err_t *err)
{
    if (i >= m->n || m->dirfd < 0)
        return err_set(err, ERR_USAGE,
                       "manifest entry %zu cannot be verified (no such entry "
                       "or manifest not loaded from a directory)",
                       i);
    pk_manifest_entry_t *e = &m->entries[i];
    if (e->fd >= 0)
        return 0;
    const char *dir = m->dir;
    int fd = openat(m->dirfd, e->filename,
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return err_set(err, ERR_VERIFY,
                           "%s/%s (%s %s) is listed in the manifest but "
                           "absent; restore it or re-sign the directory",
                           dir, e->filename, e->name, e->version);
        if (errno == ELOOP)
            return err_set(err, ERR_VERIFY,
                           "%s/%s (%s %s) is a symlink; wheels must be "
                           "regular files in the package directory",
                           dir, e->filename, e->name, e->version);
        return err_set(err, ERR_VERIFY, "cannot open %s/%s (%s %s): %s", dir,
                       e->filename, e->name, e->version, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, ERR_VERIFY, "%s/%s (%s %s) is not a regular file",
                       dir, e->filename, e->name, e->version);
    }
    if ((uint64_t)st.st_size != e->size) {
        close(fd);
        return err_set(err, ERR_VERIFY,
                       "%s/%s (%s %s): size mismatch: the manifest says %llu "
                       "bytes, the file has %llu; it was changed after "
                       "signing, so restore it or re-sign the directory",
                       dir, e->filename, e->name, e->version,
                       (unsigned long long)e->size,
                       (unsigned long long)st.st_size);
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    uint64_t got = 0;
    if (s_hash_fd(fd, e->size, h, &got) != 0) {
        int en = errno;
        close(fd);
        return err_set(err, ERR_VERIFY, "cannot read %s/%s (%s %s): %s", dir,
                       e->filename, e->name, e->version, strerror(en));
    }
    if (got != e->size) {
        close(fd);
        return err_set(err, ERR_VERIFY,
                       "%s/%s (%s %s) changed size while being verified", dir,
                       e->filename, e->name, e->version);
    }
    char hex[HASH_HEX + 1];
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    if (strcmp(hex, e->sha256) != 0) {
        close(fd);
        return err_set(err, ERR_VERIFY,
                       "%s/%s (%s %s): SHA-256 mismatch: the manifest says "
                       "%.16s..., the file has %.16s...; it was changed after "
                       "signing, so restore it or re-sign the directory",
                       dir, e->filename, e->name, e->version, e->sha256, hex);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    e->fd = fd;
    return 0;
}

pk_manifest_t *
pk_manifest_load_verified(const char *dir, const pk_trust_t *trust, err_t *err)
{
    pk_manifest_t *m = pk_manifest_load_signed(dir, trust, err);
    if (!m)
        return NULL;
    for (size_t i = 0; i < m->n; i++)
        if (pk_manifest_verify_entry(m, i, err)) {
            pk_manifest_destroy(&m);
            return NULL;
        }
    return m;
}

/* --- use ---------------------------------------------------------------- */

/* "a 1.0, b 2.0" for every distinct name/version (optionally one name),
 * capped in length. New string. */
static char *
s_available(const pk_manifest_t *m, const char *only_name)
{
    buf_t b;
    buf_init(&b, 0);
    size_t shown = 0, left = 0;
    for (size_t i = 0; i < m->n; i++) {
        const pk_manifest_entry_t *e = &m->entries[i];
        if (only_name && strcmp(e->name, only_name) != 0)
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(m->entries[j].name, e->name) == 0 &&
                   strcmp(m->entries[j].version, e->version) == 0;
        if (seen)
            continue;
        if (b.len > 600) {
            left++;
            continue;
        }
        buf_printf(&b, "%s%s %s", shown ? ", " : "", e->name, e->version);
        shown++;
    }
    if (left)
        buf_printf(&b, " and %zu more", left);
    if (shown == 0)
        buf_puts(&b, "nothing");
    return buf_detach(&b, NULL);
}

int
pk_manifest_resolve(const pk_manifest_t *m, const char *requirement,
                    const pk_manifest_entry_t **out, size_t max, err_t *err)
{
    char q[96];
    char *name = NULL, *version = NULL, *norm = NULL, *avail = NULL;
    int rc = -1;
    const char *r = requirement;
    while (*r == ' ' || *r == '\t')
        r++;
    size_t rlen = strlen(r);
    while (rlen && (r[rlen - 1] == ' ' || r[rlen - 1] == '\t'))
        rlen--;
    const char *eq = memmem(r, rlen, "==", 2);
    size_t nlen = eq ? (size_t)(eq - r) : rlen;
    name = xstrndup(r, nlen);
    if (eq)
        version = xstrndup(eq + 2, rlen - nlen - 2);
    /* Strip spaces around "==". */
    for (size_t n = strlen(name); n && name[n - 1] == ' '; n--)
        name[n - 1] = '\0';
    const char *v = version;
    while (v && *v == ' ')
        v++;
    if (!s_charset(name, strlen(name), "-_.") ||
        (version && !s_charset(v, strlen(v), ".+!_"))) {
        err_set(err, ERR_USAGE,
                "requirement '%s' is not supported: use NAME or "
                "NAME==VERSION (no other specifiers, extras or markers)",
                s_quote(requirement, q, sizeof q));
        goto out;
    }
    norm = pk_manifest_normalize_name(name);
    int found = 0, name_found = 0;
    for (size_t i = 0; i < m->n; i++) {
        const pk_manifest_entry_t *e = &m->entries[i];
        if (strcmp(e->name, norm) != 0)
            continue;
        name_found = 1;
        if (v && strcasecmp(e->version, v) != 0)
            continue;
        if ((size_t)found < max && out)
            out[found] = e;
        found++;
    }
    if (found == 0) {
        if (name_found) {
            avail = s_available(m, norm);
            err_set(err, ERR_USAGE,
                    "%s %s is not in the signed manifest%s%s; versions "
                    "available: %s",
                    norm, v, m->dir ? " of " : "", m->dir ? m->dir : "", avail);
        } else {
            avail = s_available(m, NULL);
            err_set(err, ERR_USAGE,
                    "package '%s' is not in the signed manifest%s%s; "
                    "available: %s",
                    norm, m->dir ? " of " : "", m->dir ? m->dir : "", avail);
        }
        goto out;
    }
    rc = found;
out:
    free(name);
    free(version);
    free(norm);
    free(avail);
    return rc;
}

char *
pk_manifest_requirements_txt(const pk_manifest_entry_t *const *entries,
                             size_t n)
{
    buf_t b;
    buf_init(&b, 0);
    for (size_t i = 0; i < n; i++) {
        const pk_manifest_entry_t *e = entries[i];
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(entries[j]->name, e->name) == 0 &&
                   strcmp(entries[j]->version, e->version) == 0;
        if (seen)
            continue;
        buf_printf(&b, "%s==%s", e->name, e->version);
        for (size_t j = i; j < n; j++)
            if (strcmp(entries[j]->name, e->name) == 0 &&
                strcmp(entries[j]->version, e->version) == 0)
                buf_printf(&b, " --hash=sha256:%s", entries[j]->sha256);
        buf_puts(&b, "\n");
    }
    return buf_detach(&b, NULL);
}

int
pk_manifest_entry_copy(const pk_manifest_entry_t *entry, int dst_dirfd,
                       err_t *err)
{
    int rc = -1;
    if (entry->fd < 0)
        return err_set(err, ERR_USAGE,
                       "%s has not been verified; load the manifest with "
                       "pk_manifest_load_verified",
                       entry->filename);
    int out =
        openat(dst_dirfd, entry->filename,
               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (out < 0)
        return err_set(err, ERR_IO, "cannot create copy of %s: %s",
                       entry->filename, strerror(errno));
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char *chunk = xmalloc(IO_CHUNK);
    uint64_t off = 0;
    while (off <= entry->size) {
        ssize_t n = pread(entry->fd, chunk, IO_CHUNK, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_set(err, ERR_IO, "cannot read %s: %s", entry->filename,
                    strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        if (file_write_all(out, chunk, (size_t)n) != 0) {
            err_set(err, ERR_IO, "cannot write copy of %s: %s", entry->filename,
                    strerror(errno));
            goto out;
        }
        crypto_hash_sha256_update(&st, chunk, (size_t)n);
        off += (uint64_t)n;
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    char hex[HASH_HEX + 1];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    if (off != entry->size || strcmp(hex, entry->sha256) != 0) {
        err_set(err, ERR_VERIFY,
                "%s (%s %s) changed after it was verified (copied %llu bytes, "
                "SHA-256 %.16s...); the copy was removed",
                entry->filename, entry->name, entry->version,
                (unsigned long long)off, hex);
        goto out;
    }
    rc = 0;
out:
    free(chunk);
    if (close(out) != 0 && rc == 0)
        rc = err_set(err, ERR_IO, "cannot write copy of %s: %s",
                     entry->filename, strerror(errno));
    if (rc)
        unlinkat(dst_dirfd, entry->filename, 0);
    return rc;
}
