/*
 * pk_manifest_sign: signing a wheel directory and loading a signed one
 * (signature first, then each wheel's size and SHA-256). See pk_manifest.h
 * for the formats and the order of checks.
 */
#include "common/strv.h"
#include "packages/pk_manifest.h"
#include "packages/pk_manifest_impl.h"

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
        return err_errno(err, ERR_VERIFY, "cannot open %s/%s", dir, name);
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
            err_errno(err, ERR_VERIFY, "cannot read %s/%s", dir, name);
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

/* List the wheels of dirfd, refusing anything else. Sorted, a new
 * NULL-terminated list (strv_free). */
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
        return err_errno(err, ERR_IO, "cannot list %s", dir);
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (nm[0] == '.' || strcmp(nm, PK_MANIFEST_JSON) == 0 ||
            strcmp(nm, PK_MANIFEST_SIG) == 0)
            continue;
        pk_manifest_quote(nm, q, sizeof q);
        struct stat st;
        if (fstatat(dirfd, nm, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            err_errno(err, ERR_IO, "cannot stat %s/%s", dir, q);
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
        strv_push(&names, &n, xstrdup(nm));
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
    strv_free(names);
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
        return err_errno(err, ERR_IO, "cannot open %s/%s", dir, fn);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(err, ERR_USAGE, "%s/%s is not a regular file", dir, fn);
        goto out;
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    uint64_t got = 0;
    if (s_hash_fd(fd, (uint64_t)st.st_size, h, &got) != 0) {
        err_errno(err, ERR_IO, "cannot read %s/%s", dir, fn);
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
        err_errno(err, ERR_USAGE, "cannot open package directory %s", dir);
        goto fail;
    }
    if (s_list_wheels(dirfd, dir, &names, &nnames, err))
        goto fail;
    const pk_pubkey_t *pub = pk_seckey_public(key);
    m = pk_manifest_alloc();
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
    if (pk_manifest_check_duplicates(m, err)) {
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
    strv_free(names);
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
    m = pk_manifest_alloc();
    m->dir = xstrdup(dir);
    m->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (m->dirfd < 0) {
        err_errno(err, ERR_USAGE, "cannot open package directory %s", dir);
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
                dir, pk_manifest_quote(parsed->signer, q, sizeof q),
                m->signed_by.id);
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
        return err_errno(err, ERR_VERIFY, "cannot open %s/%s (%s %s)", dir,
                         e->filename, e->name, e->version);
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
        return err_errnum(err, ERR_VERIFY, en, "cannot read %s/%s (%s %s)", dir,
                          e->filename, e->name, e->version);
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
