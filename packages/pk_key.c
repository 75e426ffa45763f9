/*
 * pk_key: Ed25519 key files and signatures. See pk_key.h for the formats.
 */
#include "packages/pk_key.h"

#include "common/fileio.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUB_PREFIX "ed25519:"
#define SEC_PREFIX "ed25519-secret:"
#define KEY_FILE_MAX 4096

struct pk_seckey {
    unsigned char *sk; /* sodium_malloc'd crypto_sign_SECRETKEYBYTES */
    pk_pubkey_t pub;   /* the public half, with id and label */
};

int
pk_key_sodium_init(err_t *err)
{
    if (sodium_init() < 0)
        return err_set(err, ERR_IO, "libsodium failed to initialise");
    return 0;
}

int
pk_key_label_ok(const char *label)
{
    size_t n = strlen(label);
    if (n > PK_KEY_LABEL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)label[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("._@+-", c)))
            return 0;
    }
    return 1;
}

void
pk_pubkey_set_id(pk_pubkey_t *out)
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, out->pk, sizeof out->pk);
    sodium_bin2hex(out->id, sizeof out->id, h, PK_KEY_ID_HEX / 2);
}

static int
s_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * Split "PREFIX<base64> [LABEL]" (whitespace-trimmed) and decode the base64
 * into bin[want]. Copies the label into label[PK_KEY_LABEL_MAX + 1].
 * `what` names the input in messages (never echoes secret bytes).
 */
static int
s_parse_line(const char *text, const char *prefix, unsigned char *bin,
             size_t want, char *label, const char *what, err_t *err)
{
    while (s_is_space(*text))
        text++;
    size_t plen = strlen(prefix);
    if (strncmp(text, prefix, plen) != 0)
        return err_set(err, ERR_USAGE,
                       "%s does not start with '%s'; expected "
                       "'%s<base64> [LABEL]'",
                       what, prefix, prefix);
    const char *b64 = text + plen;
    size_t blen = 0;
    while (b64[blen] && !s_is_space(b64[blen]))
        blen++;
    const char *rest = b64 + blen;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    size_t llen = 0;
    while (rest[llen] && !s_is_space(rest[llen]))
        llen++;
    const char *tail = rest + llen;
    while (s_is_space(*tail))
        tail++;
    if (*tail)
        return err_set(err, ERR_USAGE,
                       "%s has extra text after the label; expected one line "
                       "'%s<base64> [LABEL]'",
                       what, prefix);
    size_t got = 0;
    const char *end = NULL;
    if (sodium_base642bin(bin, want, b64, blen, NULL, &got, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != want || end != b64 + blen)
        return err_set(err, ERR_USAGE,
                       "%s: the key is not %zu bytes of standard base64", what,
                       want);
    if (llen > PK_KEY_LABEL_MAX)
        return err_set(err, ERR_USAGE, "%s: label longer than %d bytes", what,
                       PK_KEY_LABEL_MAX);
    memcpy(label, rest, llen);
    label[llen] = '\0';
    if (!pk_key_label_ok(label))
        return err_set(err, ERR_USAGE,
                       "%s: label may use only letters, digits and ._@+-",
                       what);
    return 0;
}

int
pk_pubkey_parse(pk_pubkey_t *out, const char *text, err_t *err)
{
    if (pk_key_sodium_init(err))
        return -1;
    memset(out, 0, sizeof *out);
    if (s_parse_line(text, PUB_PREFIX, out->pk, sizeof out->pk, out->label,
                     "public key", err))
        return -1;
    pk_pubkey_set_id(out);
    return 0;
}

char *
pk_pubkey_format(const pk_pubkey_t *key)
{
    char b64[sodium_base64_ENCODED_LEN(PK_KEY_PUBLIC_BYTES,
                                       sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof b64, key->pk, sizeof key->pk,
                      sodium_base64_VARIANT_ORIGINAL);
    return xasprintf(PUB_PREFIX "%s", b64);
}

/* Write all of buf to fd; 0 or -1 with errno. */
/* Create `path` exclusively with `mode` (umask does not apply) and write. */
static int
s_create_file(const char *path, mode_t mode, const char *data, size_t len,
              err_t *err)
{
    int fd =
        open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return err_set(err, ERR_USAGE,
                           "%s already exists; refusing to overwrite a key "
                           "(choose another path or remove it yourself)",
                           path);
        return err_errno(err, ERR_IO, "cannot create %s", path);
    }
    int rc = 0;
    if (fchmod(fd, mode) != 0 || file_write_all(fd, data, len) != 0 ||
        fsync(fd) != 0)
        rc = err_errno(err, ERR_IO, "cannot write %s", path);
    if (close(fd) != 0 && rc == 0)
        rc = err_errno(err, ERR_IO, "cannot write %s", path);
    if (rc)
        unlink(path);
    return rc;
}

int
pk_key_generate(const char *path, const char *label, pk_pubkey_t *pub_out,
                err_t *err)
{
    int rc = -1;
    char *pubpath = NULL, *publine = NULL, *pubtext = NULL;
    unsigned char *sk = NULL;
    char *secline = NULL;
    size_t seclen = 0;
    pk_pubkey_t pub;

    if (pk_key_sodium_init(err))
        return -1;
    if (!label)
        label = "";
    if (!pk_key_label_ok(label))
        return err_set(err, ERR_USAGE,
                       "label '%.*s' is not valid: at most %d of letters, "
                       "digits and ._@+-",
                       PK_KEY_LABEL_MAX, label, PK_KEY_LABEL_MAX);
    pubpath = xasprintf("%s.pub", path);
    struct stat st;
    if (lstat(path, &st) == 0 || lstat(pubpath, &st) == 0) {
        err_set(err, ERR_USAGE,
                "%s already exists; refusing to overwrite a key "
                "(choose another path or remove it yourself)",
                lstat(path, &st) == 0 ? path : pubpath);
        goto out;
    }
    memset(&pub, 0, sizeof pub);
    sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
    size_t b64len = sodium_base64_ENCODED_LEN(crypto_sign_SECRETKEYBYTES,
                                              sodium_base64_VARIANT_ORIGINAL);
    seclen = strlen(SEC_PREFIX) + b64len + 1 + PK_KEY_LABEL_MAX + 2;
    secline = sodium_malloc(seclen);
    if (!sk || !secline) {
        err_set(err, ERR_IO, "cannot allocate guarded memory for a key");
        goto out;
    }
    crypto_sign_keypair(pub.pk, sk);
    snprintf(pub.label, sizeof pub.label, "%s", label);
    pk_pubkey_set_id(&pub);

    memcpy(secline, SEC_PREFIX, strlen(SEC_PREFIX));
    sodium_bin2base64(secline + strlen(SEC_PREFIX), b64len, sk,
                      crypto_sign_SECRETKEYBYTES,
                      sodium_base64_VARIANT_ORIGINAL);
    size_t used = strlen(secline);
    snprintf(secline + used, seclen - used, "%s%s\n", *label ? " " : "", label);

    publine = pk_pubkey_format(&pub);
    pubtext = xasprintf("%s%s%s\n", publine, *label ? " " : "", label);
    if (s_create_file(path, 0600, secline, strlen(secline), err))
        goto out;
    if (s_create_file(pubpath, 0644, pubtext, strlen(pubtext), err)) {
        unlink(path);
        goto out;
    }
    if (pub_out)
        *pub_out = pub;
    rc = 0;
out:
    sodium_free(sk);
    sodium_free(secline);
    free(pubpath);
    free(publine);
    free(pubtext);
    return rc;
}

pk_seckey_t *
pk_seckey_load(const char *path, err_t *err)
{
    pk_seckey_t *key = NULL;
    char *text = NULL;
    int fd = -1;

    if (pk_key_sodium_init(err))
        return NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        err_errno(err, ERR_USAGE, "cannot open secret key %s", path);
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(err, ERR_USAGE, "secret key %s is not a regular file", path);
        goto fail;
    }
    if (st.st_mode & 077) {
        err_set(err, ERR_USAGE,
                "secret key %s is accessible by group or others (mode %04o); "
                "run 'chmod 600 %s'",
                path, (unsigned)(st.st_mode & 07777), path);
        goto fail;
    }
    if (st.st_size <= 0 || st.st_size > KEY_FILE_MAX) {
        err_set(err, ERR_USAGE, "secret key %s has an implausible size", path);
        goto fail;
    }
    text = sodium_malloc((size_t)st.st_size + 1);
    key = xcalloc(1, sizeof *key);
    key->sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
    if (!text || !key->sk) {
        err_set(err, ERR_IO, "cannot allocate guarded memory for a key");
        goto fail;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    text[got] = '\0';
    if (got != (size_t)st.st_size || strlen(text) != got) {
        err_set(err, ERR_USAGE, "cannot read secret key %s", path);
        goto fail;
    }
    err_t perr;
    err_clear(&perr);
    if (s_parse_line(text, SEC_PREFIX, key->sk, crypto_sign_SECRETKEYBYTES,
                     key->pub.label, "secret key", &perr)) {
        err_set(err, ERR_USAGE, "%s: %s (is this a jupyter-agent secret key?)",
                path, perr.text);
        goto fail;
    }
    /* The 64-byte secret is seed || public key; check the halves agree. */
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    unsigned char *sk2 = sodium_malloc(crypto_sign_SECRETKEYBYTES);
    if (!sk2) {
        err_set(err, ERR_IO, "cannot allocate guarded memory for a key");
        goto fail;
    }
    crypto_sign_seed_keypair(pk, sk2, key->sk);
    int same = sodium_memcmp(sk2, key->sk, crypto_sign_SECRETKEYBYTES) == 0;
    sodium_free(sk2);
    if (!same) {
        err_set(err, ERR_USAGE,
                "secret key %s is corrupt: its public half does not match "
                "its seed; generate a new key",
                path);
        goto fail;
    }
    memcpy(key->pub.pk, pk, sizeof pk);
    pk_pubkey_set_id(&key->pub);
    sodium_free(text);
    close(fd);
    return key;
fail:
    sodium_free(text);
    if (fd >= 0)
        close(fd);
    pk_seckey_destroy(&key);
    return NULL;
}

void
pk_seckey_destroy(pk_seckey_t **p)
{
    if (!p || !*p)
        return;
    sodium_free((*p)->sk);
    free(*p);
    *p = NULL;
}

const pk_pubkey_t *
pk_seckey_public(const pk_seckey_t *key)
{
    return &key->pub;
}

int
pk_seckey_sign(const pk_seckey_t *key, const void *msg, size_t len,
               unsigned char sig[PK_KEY_SIG_BYTES], err_t *err)
{
    if (crypto_sign_detached(sig, NULL, msg, len, key->sk) != 0)
        return err_set(err, ERR_IO, "Ed25519 signing failed");
    return 0;
}

int
pk_pubkey_verify(const pk_pubkey_t *key, const void *msg, size_t len,
                 const unsigned char sig[PK_KEY_SIG_BYTES])
{
    if (sodium_init() < 0)
        return 0;
    return crypto_sign_verify_detached(sig, msg, len, key->pk) == 0;
}
