/*
 * pk_trust: trusted public keys from flags and directories. See pk_trust.h.
 */
#include "packages/pk_trust.h"

#include "common/buf.h"
#include "common/strv.h"
#include "common/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUB_FILE_MAX 4096
#define TRUST_MAX 1024

struct trust_key {
    pk_pubkey_t key; /* the public key with id and label */
    char *origin;    /* owned: "--trust" or the .pub file's path */
};

struct pk_trust {
    struct trust_key *keys; /* owned array of n entries */
    size_t n;               /* keys in use */
    size_t cap;             /* keys allocated */
};

pk_trust_t *
pk_trust_new(void)
{
    return xcalloc(1, sizeof(pk_trust_t));
}

void
pk_trust_destroy(pk_trust_t **p)
{
    if (!p || !*p)
        return;
    for (size_t i = 0; i < (*p)->n; i++)
        free((*p)->keys[i].origin);
    free((*p)->keys);
    free(*p);
    *p = NULL;
}

const pk_pubkey_t *
pk_trust_find(const pk_trust_t *t, const unsigned char pk[PK_KEY_PUBLIC_BYTES])
{
    for (size_t i = 0; i < t->n; i++)
        if (memcmp(t->keys[i].key.pk, pk, PK_KEY_PUBLIC_BYTES) == 0)
            return &t->keys[i].key;
    return NULL;
}

static int
s_add(pk_trust_t *t, const pk_pubkey_t *key, const char *origin, err_t *err)
{
    if (pk_trust_find(t, key->pk))
        return 0;
    if (t->n >= TRUST_MAX)
        return err_set(err, ERR_USAGE, "more than %d trusted keys", TRUST_MAX);
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 4;
        t->keys = xrealloc(t->keys, t->cap * sizeof *t->keys);
    }
    t->keys[t->n].key = *key;
    t->keys[t->n].origin = xstrdup(origin);
    t->n++;
    return 0;
}

int
pk_trust_add_key(pk_trust_t *t, const char *text, const char *origin,
                 err_t *err)
{
    pk_pubkey_t key;
    if (pk_pubkey_parse(&key, text, err))
        return err_prefix(err, "%s", origin);
    return s_add(t, &key, origin, err);
}

/* Who may have written `st`: only root or the user running us, and nobody
 * else through a group or other write bit (sticky or not: the sticky bit
 * stops removing files, not adding them). NULL when it is safe, else what
 * is wrong, for "KIND PATH is ...". */
static const char *
s_unsafe(const struct stat *st)
{
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return "owned by another user";
    if (st->st_mode & S_IWOTH)
        return "world-writable";
    if (st->st_mode & S_IWGRP)
        return "group-writable";
    return NULL;
}

/* The key in `fd` (taken), a file opened without following a symlink. */
static int
s_add_fd(pk_trust_t *t, int fd, const char *path, err_t *err)
{
    int rc = -1;
    char text[PUB_FILE_MAX + 1];
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(err, ERR_USAGE, "public key %s is not a regular file", path);
        goto out;
    }
    const char *why = s_unsafe(&st);
    if (why) {
        err_set(err, ERR_USAGE,
                "public key %s is %s, so someone else could replace it; "
                "refused. Make it owned by root or you and not writable by "
                "others ('chown %u %s; chmod go-w %s')",
                path, why, (unsigned)geteuid(), path, path);
        goto out;
    }
    ssize_t n = read(fd, text, PUB_FILE_MAX + 1);
    if (n < 0 || n > PUB_FILE_MAX) {
        err_set(err, ERR_USAGE, "public key %s is unreadable or too large",
                path);
        goto out;
    }
    text[n] = '\0';
    if (strlen(text) != (size_t)n) {
        err_set(err, ERR_USAGE, "public key %s contains a NUL byte", path);
        goto out;
    }
    rc = pk_trust_add_key(t, text, path, err);
out:
    close(fd);
    return rc;
}

static int
s_open_failed(const char *path, err_t *err)
{
    if (errno == ELOOP)
        return err_set(err, ERR_USAGE,
                       "public key %s is a symlink; trusted keys are read "
                       "only from regular files (copy the key there)",
                       path);
    return err_errno(err, ERR_USAGE, "cannot open public key %s", path);
}

int
pk_trust_add_file(pk_trust_t *t, const char *path, err_t *err)
{
    int fd =
        open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return s_open_failed(path, err);
    return s_add_fd(t, fd, path, err);
}

int
pk_trust_add_arg(pk_trust_t *t, const char *arg, err_t *err)
{
    if (strncmp(arg, "ed25519:", 8) == 0)
        return pk_trust_add_key(t, arg, "--trust", err);
    return pk_trust_add_file(t, arg, err);
}

static int
s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int
pk_trust_add_dir(pk_trust_t *t, const char *dir, err_t *err)
{
    int rc = -1;
    char **names = NULL;
    size_t n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return err_errno(err, ERR_USAGE,
                         "cannot read trusted-keys directory %s", dir);
    }
    struct stat st;
    if (fstat(dirfd(d), &st) != 0) {
        err_errno(err, ERR_USAGE, "cannot read trusted-keys directory %s", dir);
        goto out;
    }
    const char *why = s_unsafe(&st);
    if (why) {
        err_set(err, ERR_USAGE,
                "trusted-keys directory %s is %s, so a key added there "
                "would be trusted; refused. Make it owned by root or you "
                "and not writable by others ('chown %u %s; chmod go-w %s')",
                dir, why, (unsigned)geteuid(), dir, dir);
        goto out;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 5 ||
            strcmp(e->d_name + len - 4, ".pub") != 0)
            continue;
        strv_push(&names, &n, xstrdup(e->d_name));
    }
    if (n)
        qsort(names, n, sizeof *names, s_cmp_str);
    for (size_t i = 0; i < n; i++) {
        char *path = xasprintf("%s/%s", dir, names[i]);
        /* From the directory checked above, never through a symlink. */
        int fd =
            openat(dirfd(d), names[i],
                   O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
        int r = fd < 0 ? s_open_failed(path, err) : s_add_fd(t, fd, path, err);
        free(path);
        if (r)
            goto out;
    }
    rc = 0;
out:
    strv_free(names);
    closedir(d);
    return rc;
}

int
pk_trust_add_defaults(pk_trust_t *t, err_t *err)
{
    const char *env = getenv("JUPYTER_AGENT_TRUSTED_KEYS");
    if (env && *env)
        return pk_trust_add_dir(t, env, err);
    const char *home = getenv("HOME");
    if (home && *home) {
        char *dir = xasprintf("%s/.config/jupyter-agent/trusted-keys", home);
        int r = pk_trust_add_dir(t, dir, err);
        free(dir);
        if (r)
            return -1;
    }
    return pk_trust_add_dir(t, "/etc/jupyter-agent/trusted-keys", err);
}

size_t
pk_trust_count(const pk_trust_t *t)
{
    return t->n;
}

const pk_pubkey_t *
pk_trust_key(const pk_trust_t *t, size_t i)
{
    return i < t->n ? &t->keys[i].key : NULL;
}

const char *
pk_trust_origin(const pk_trust_t *t, size_t i)
{
    return i < t->n ? t->keys[i].origin : NULL;
}

char *
pk_trust_describe(const pk_trust_t *t)
{
    if (!t || t->n == 0)
        return xstrdup("none");
    buf_t b;
    buf_init(&b, 0);
    for (size_t i = 0; i < t->n; i++) {
        const struct trust_key *k = &t->keys[i];
        buf_printf(&b, "%s%s (%s%s%s)", i ? ", " : "", k->key.id,
                   k->key.label[0] ? k->key.label : "",
                   k->key.label[0] ? ", " : "", k->origin);
    }
    return buf_detach(&b, NULL);
}
