/*
 * pk_manifest: signed wheel manifests. See pk_manifest.h for the formats and
 * the order of checks.
 */
#include "packages/pk_manifest.h"
#include "packages/pk_manifest_impl.h"
#include "packages/pk_pyreq.h"

#include "common/buf.h"
#include "common/fileio.h"
#include "common/jget.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- helpers ------------------------------------------------------------ */

/* Copy untrusted text into out[cap] for a message: printable ASCII only,
 * others as '?', cut at 80 bytes with "...". */
const char *
pk_manifest_quote(const char *s, char *out, size_t cap)
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

pk_manifest_t *
pk_manifest_alloc(void)
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
    pk_manifest_quote(filename, q, sizeof q);
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
    pk_manifest_quote(filename, q, sizeof q);
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
                           idx, pk_manifest_quote(key, q, sizeof q));
    }
    const char *filename = jget_strict(obj, "filename", NULL);
    if (!filename)
        return err_set(err, ERR_VERIFY,
                       "files[%zu] has no string field 'filename'", idx);
    if (pk_manifest_parse_wheel_filename(filename, &name, &version, err)) {
        err_prefix(err, "files[%zu]", idx);
        goto out;
    }
    const char *jname = jget_strict(obj, "name", NULL);
    const char *jver = jget_strict(obj, "version", NULL);
    const char *sha = jget_strict(obj, "sha256", NULL);
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
int
pk_manifest_check_duplicates(const pk_manifest_t *m, err_t *err)
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
                    pk_manifest_quote(key, q, sizeof q));
            goto fail;
        }
    }
    const char *format = jget_strict(root, "format", NULL);
    if (!format || strcmp(format, PK_MANIFEST_FORMAT) != 0) {
        err_set(err, ERR_VERIFY,
                "manifest 'format' is '%s', expected '" PK_MANIFEST_FORMAT "'",
                format ? pk_manifest_quote(format, q, sizeof q) : "(missing)");
        goto fail;
    }
    const char *signer = jget_strict(root, "signer", NULL);
    const char *created = jget_strict(root, "created", NULL);
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
    m = pk_manifest_alloc();
    m->signer = xstrdup(signer);
    m->created = xstrdup(created);
    m->entries = xcalloc(nfiles ? nfiles : 1, sizeof *m->entries);
    for (size_t i = 0; i < nfiles; i++) {
        if (s_parse_entry(json_array_get(files, i), i, &m->entries[i], err))
            goto fail;
        m->n++;
    }
    if (pk_manifest_check_duplicates(m, err))
        goto fail;
    json_decref(root);
    return m;
fail:
    json_decref(root);
    pk_manifest_destroy(&m);
    return NULL;
}

/* --- use ---------------------------------------------------------------- */

char *
pk_manifest_available(const pk_manifest_t *m, const char *only_name)
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
                   strcasecmp(m->entries[j].version, e->version) == 0;
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
                pk_manifest_quote(requirement, q, sizeof q));
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
            avail = pk_manifest_available(m, norm);
            err_set(err, ERR_USAGE,
                    "%s %s is not in the signed manifest%s%s; versions "
                    "available: %s",
                    norm, v, m->dir ? " of " : "", m->dir ? m->dir : "", avail);
        } else {
            avail = pk_manifest_available(m, NULL);
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

const char *
pk_manifest_best(const pk_manifest_t *m, const char *norm,
                 const char *specifier, bool *listed)
{
    const char *best = NULL;
    bool found = false;
    if (specifier && !*specifier)
        specifier = NULL;
    for (size_t i = 0; i < m->n; i++) {
        const pk_manifest_entry_t *e = &m->entries[i];
        if (strcmp(e->name, norm) != 0)
            continue;
        found = true;
        if (specifier && pk_pyreq_spec_match(specifier, e->version, NULL) != 1)
            continue;
        if (!best || pk_pyver_cmp(e->version, best, NULL) > 0)
            best = e->version;
    }
    if (listed)
        *listed = found;
    return best;
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
        return err_errno(err, ERR_IO, "cannot create copy of %s",
                         entry->filename);
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char *chunk = xmalloc(IO_CHUNK);
    uint64_t off = 0;
    while (off <= entry->size) {
        ssize_t n = pread(entry->fd, chunk, IO_CHUNK, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_errno(err, ERR_IO, "cannot read %s", entry->filename);
            goto out;
        }
        if (n == 0)
            break;
        if (file_write_all(out, chunk, (size_t)n) != 0) {
            err_errno(err, ERR_IO, "cannot write copy of %s", entry->filename);
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
        rc = err_errno(err, ERR_IO, "cannot write copy of %s", entry->filename);
    if (rc)
        unlinkat(dst_dirfd, entry->filename, 0);
    return rc;
}
