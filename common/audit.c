/*
 * audit: the writer of the hash-chained log (audit.h, docs/audit.md).
 */
#include "common/audit.h"
#include "common/audit_impl.h"
#include "common/jget.h"

#include "common/clock.h"
#include "common/fileio.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The longest last line we read back to continue a chain. */
#define TAIL_MAX (8u << 20)

struct audit_log {
    int fd;
    int refs;
    dev_t dev;
    ino_t ino;
    char *path;
    pthread_mutex_t lock;
    off_t known_size;          /* the file's size after our last append */
    long long seq;             /* the last record's seq */
    char prev[AUDIT_HASH_HEX]; /* the last record's line hash */
    char log_id[33];
    bool has_signer;
    bool unsealed; /* records since the last seal */
    audit_signer_t signer;
    audit_log_t *next; /* in s_logs */
};

/* The logs open in this process, so one path has one writer. */
static pthread_mutex_t s_logs_lock = PTHREAD_MUTEX_INITIALIZER;
static audit_log_t *s_logs;

void
audit_sha256_hex(const void *data, size_t len, char out[AUDIT_HASH_HEX])
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, data, len);
    sodium_bin2hex(out, AUDIT_HASH_HEX, h, sizeof h);
}

void
audit_new_id(char out[33])
{
    unsigned char r[16];
    randombytes_buf(r, sizeof r);
    sodium_bin2hex(out, 33, r, sizeof r);
}

void
audit_genesis(const char *log_id, char out[AUDIT_HASH_HEX])
{
    char g[128];
    int n = snprintf(g, sizeof g, "jupyter-agent audit log v1\n%s\n", log_id);
    audit_sha256_hex(g, (size_t)n, out);
}

/* Read the file's first and last lines to continue its chain: seq, prev,
 * log_id. The file is locked. 0, or -1 with err. */
static int
s_read_tail(audit_log_t *l, off_t size, err_t *err)
{
    if (size == 0) {
        l->seq = -1;
        l->log_id[0] = '\0';
        return 0;
    }
    size_t want = size > (off_t)TAIL_MAX ? TAIL_MAX : (size_t)size;
    char *buf = xmalloc(want + 1);
    int rc = -1;
    json_t *first = NULL, *last = NULL;
    ssize_t got = pread(l->fd, buf, want, size - (off_t)want);
    if (got != (ssize_t)want) {
        err_errno(err, ERR_IO, "cannot read the audit log %s", l->path);
        goto out;
    }
    if (buf[want - 1] != '\n') {
        err_set(err, ERR_VERIFY,
                "the audit log %s ends in the middle of a line (cut short?); "
                "check it with 'jupyter-agent audit verify %s' and use a new "
                "file",
                l->path, l->path);
        goto out;
    }
    buf[want - 1] = '\0';
    char *start = strrchr(buf, '\n');
    start = start ? start + 1 : (want == (size_t)size ? buf : NULL);
    if (!start) {
        err_set(err, ERR_VERIFY,
                "the last record of the audit log %s is "
                "longer than we read back",
                l->path);
        goto out;
    }
    last = json_loads(start, 0, NULL);
    int64_t seq = jget_int(last, "seq", -1);
    if (seq < 0) {
        err_set(err, ERR_VERIFY,
                "the last line of the audit log %s is not an audit record; "
                "check it with 'jupyter-agent audit verify %s' or use a new "
                "file",
                l->path, l->path);
        goto out;
    }
    l->seq = seq;
    audit_sha256_hex(start, strlen(start), l->prev);
    /* The first line, for the log id. */
    char head[512];
    ssize_t h = pread(l->fd, head, sizeof head - 1, 0);
    if (h <= 0) {
        err_errno(err, ERR_IO, "cannot read the audit log %s", l->path);
        goto out;
    }
    head[h] = '\0';
    char *nl = strchr(head, '\n');
    if (nl)
        *nl = '\0';
    first = json_loads(head, 0, NULL);
    const char *id = jget_strict(first, "log_id", NULL);
    if (!id || strlen(id) != 32) {
        err_set(err, ERR_VERIFY,
                "the audit log %s does not start with its 'log' record; "
                "check it with 'jupyter-agent audit verify %s'",
                l->path, l->path);
        goto out;
    }
    memcpy(l->log_id, id, 33);
    rc = 0;
out:
    json_decref(first);
    json_decref(last);
    free(buf);
    return rc;
}

/* Build and write one record; the file is locked, l->lock held. */
static int
s_write_record(audit_log_t *l, const char *session, const char *type,
               json_t *fields, err_t *err)
{
    json_t *rec = json_object();
    char ts[40];
    clock_iso8601_now(ts, sizeof ts);
    json_object_set_new(rec, "seq", json_integer(l->seq + 1));
    json_object_set_new(rec, "ts", json_string(ts));
    json_object_set_new(rec, "session",
                        session ? json_string(session) : json_null());
    json_object_set_new(rec, "type", json_string(type));
    const char *k;
    json_t *v;
    json_object_foreach(fields, k, v)
    {
        if (strcmp(k, "seq") && strcmp(k, "ts") && strcmp(k, "session") &&
            strcmp(k, "type") && strcmp(k, "prev"))
            json_object_set(rec, k, v);
    }
    json_object_set_new(rec, "prev", json_string(l->prev));
    char *line = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(rec);
    if (!line)
        return err_set(err, ERR_IO, "cannot encode an audit record (%s)", type);
    size_t n = strlen(line);
    char hash[AUDIT_HASH_HEX];
    audit_sha256_hex(line, n, hash);
    line[n] = '\n'; /* one write: the line and its newline */
    int w = file_write_all(l->fd, line, n + 1);
    free(line);
    if (w < 0 || fdatasync(l->fd) < 0) {
        l->seq = -2; /* re-read what is there before the next record */
        return err_errno(err, ERR_IO, "cannot write the audit log %s", l->path);
    }
    l->seq++;
    l->unsealed = strcmp(type, "seal") != 0;
    memcpy(l->prev, hash, sizeof hash);
    l->known_size += (off_t)n + 1;
    return 0;
}

/* Lock the file and catch up with what other processes appended (or
 * read the tail the first time): 0 with the lock held, or -1 + err with
 * it released. l->lock held. */
static int
s_lock(audit_log_t *l, err_t *err)
{
    if (flock(l->fd, LOCK_EX) < 0)
        return err_errno(err, ERR_IO, "cannot lock the audit log %s", l->path);
    struct stat st;
    if (fstat(l->fd, &st) < 0) {
        err_errno(err, ERR_IO, "cannot stat the audit log %s", l->path);
        flock(l->fd, LOCK_UN);
        return -1;
    }
    if (st.st_size != l->known_size || l->seq < -1) {
        if (s_read_tail(l, st.st_size, err)) {
            flock(l->fd, LOCK_UN);
            return -1;
        }
        l->known_size = st.st_size;
    }
    return 0;
}

/* Lock and catch up, start a new file with its "log" record, then
 * write; l->lock held. */
static int
s_append_locked(audit_log_t *l, const char *session, const char *type,
                json_t *fields, err_t *err)
{
    int rc = -1;
    if (s_lock(l, err))
        return -1;
    if (l->seq == -1) {
        audit_new_id(l->log_id);
        audit_genesis(l->log_id, l->prev);
        json_t *f = json_pack("{s:s, s:i}", "log_id", l->log_id, "version", 1);
        int g = s_write_record(l, NULL, "log", f, err);
        json_decref(f);
        if (g)
            goto unlock;
    }
    if (type)
        rc = s_write_record(l, session, type, fields, err);
    else
        rc = 0;
unlock:
    flock(l->fd, LOCK_UN);
    return rc;
}

int
audit_append(audit_log_t *log, const char *session, const char *type,
             json_t *fields, err_t *err)
{
    if (!log) {
        json_decref(fields);
        return 0;
    }
    pthread_mutex_lock(&log->lock);
    int rc = s_append_locked(log, session, type, fields, err);
    pthread_mutex_unlock(&log->lock);
    json_decref(fields);
    return rc;
}

size_t
audit_seal_message(char *out, size_t size, const char *log_id, long long seq,
                   const char *prev)
{
    int n = snprintf(out, size, "jupyter-agent audit seal v1\n%s\n%lld\n%s\n",
                     log_id, seq, prev);
    return n > 0 ? (size_t)n : 0;
}

static int
s_seal_locked(audit_log_t *l, const char *session, err_t *err)
{
    int rc = -1;
    if (s_lock(l, err))
        return -1;
    if (l->seq < 0) { /* nothing to seal */
        rc = 0;
        goto unlock;
    }
    char msg[256];
    size_t n =
        audit_seal_message(msg, sizeof msg, l->log_id, l->seq + 1, l->prev);
    unsigned char sig[64];
    if (l->signer.sign(l->signer.arg, msg, n, sig, err))
        goto unlock;
    char sighex[129], pubhex[65];
    sodium_bin2hex(sighex, sizeof sighex, sig, sizeof sig);
    sodium_bin2hex(pubhex, sizeof pubhex, l->signer.pub, sizeof l->signer.pub);
    json_t *f =
        json_pack("{s:s, s:s, s:I, s:s}", "key_id", l->signer.key_id, "pub",
                  pubhex, "covers_seq", (json_int_t)l->seq, "sig", sighex);
    rc = s_write_record(l, session, "seal", f, err);
    json_decref(f);
unlock:
    flock(l->fd, LOCK_UN);
    return rc;
}

int
audit_seal(audit_log_t *log, const char *session, err_t *err)
{
    if (!log)
        return 0;
    if (!log->has_signer)
        return err_set(err, ERR_USAGE,
                       "the audit log %s has no key to seal it with "
                       "(--audit-key)",
                       log->path);
    pthread_mutex_lock(&log->lock);
    int rc = s_seal_locked(log, session, err);
    pthread_mutex_unlock(&log->lock);
    return rc;
}

static void
s_release_signer(const audit_signer_t *signer)
{
    if (signer && signer->release)
        signer->release(signer->arg);
}

static audit_log_t *
s_open(const char *path, const char *flag, const audit_signer_t *signer,
       err_t *err)
{
    if (sodium_init() < 0) {
        err_set(err, ERR_IO, "libsodium did not start");
        return NULL;
    }
    if (!flag)
        flag = "--audit";
    if (file_check_output(path, flag, err))
        return NULL;
    bool created = true;
    int fd = open(path,
                  O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC |
                      O_NOFOLLOW | O_NONBLOCK,
                  0600);
    if (fd < 0 && errno == EEXIST) {
        created = false;
        fd =
            open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    }
    if (fd < 0) {
        if (errno == ELOOP)
            err_set(err, ERR_USAGE,
                    "%s %s is a symbolic link; refusing to follow it: name "
                    "the file itself",
                    flag, path);
        else
            err_errno(err,
                      errno == ENOENT || errno == EACCES ? ERR_USAGE : ERR_IO,
                      "%s %s: cannot open", flag, path);
        return NULL;
    }
    struct stat st = {0};
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (st.st_mode)
            err_set(err, ERR_USAGE,
                    "%s %s is %s, not a regular file; refusing to write "
                    "there: choose a new path or a regular file",
                    flag, path, file_kind(st.st_mode));
        else
            err_errno(err, ERR_IO, "%s %s: cannot stat", flag, path);
        close(fd);
        return NULL;
    }
    if (created)
        (void)fchmod(fd, 0600); /* whatever the umask */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    pthread_mutex_lock(&s_logs_lock);
    for (audit_log_t *l = s_logs; l; l = l->next)
        if (l->dev == st.st_dev && l->ino == st.st_ino) {
            l->refs++;
            pthread_mutex_unlock(&s_logs_lock);
            close(fd);
            s_release_signer(signer);
            return l;
        }
    audit_log_t *l = xcalloc(1, sizeof *l);
    l->fd = fd;
    l->refs = 1;
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    l->path = xstrdup(path);
    l->seq = -2; /* read the tail before the first record */
    l->known_size = -1;
    pthread_mutex_init(&l->lock, NULL);
    if (signer) {
        l->signer = *signer;
        l->has_signer = true;
    }
    /* Check now that an existing log can be continued, and give a new one
     * its "log" record. */
    pthread_mutex_lock(&l->lock);
    int rc = s_append_locked(l, NULL, NULL, NULL, err);
    pthread_mutex_unlock(&l->lock);
    if (rc) {
        pthread_mutex_unlock(&s_logs_lock);
        err_prefix(err, "%s", flag);
        close(fd);
        pthread_mutex_destroy(&l->lock);
        free(l->path);
        free(l);
        return NULL;
    }
    l->next = s_logs;
    s_logs = l;
    pthread_mutex_unlock(&s_logs_lock);
    return l;
}

audit_log_t *
audit_log_open(const char *path, const char *flag, const audit_signer_t *signer,
               err_t *err)
{
    audit_log_t *l = s_open(path, flag, signer, err);
    if (!l)
        s_release_signer(signer);
    return l;
}

audit_log_t *
audit_log_ref(audit_log_t *log)
{
    if (log) {
        pthread_mutex_lock(&s_logs_lock);
        log->refs++;
        pthread_mutex_unlock(&s_logs_lock);
    }
    return log;
}

void
audit_log_close(audit_log_t **pl)
{
    if (!pl || !*pl)
        return;
    audit_log_t *l = *pl;
    *pl = NULL;
    pthread_mutex_lock(&s_logs_lock);
    if (--l->refs > 0) {
        pthread_mutex_unlock(&s_logs_lock);
        return;
    }
    for (audit_log_t **p = &s_logs; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            break;
        }
    pthread_mutex_unlock(&s_logs_lock);
    if (l->has_signer && l->unsealed) {
        err_t e = {0};
        if (audit_seal(l, NULL, &e))
            fprintf(stderr, "jupyter-agent: %s\n", e.text);
    }
    close(l->fd);
    pthread_mutex_destroy(&l->lock);
    if (l->has_signer && l->signer.release)
        l->signer.release(l->signer.arg);
    sodium_memzero(&l->signer, sizeof l->signer);
    free(l->path);
    free(l);
}

const char *
audit_log_path(const audit_log_t *log)
{
    return log ? log->path : NULL;
}

bool
audit_log_has_signer(const audit_log_t *log)
{
    return log && log->has_signer;
}

void
audit_code_fields(json_t *obj, const char *code, size_t max)
{
    if (!code)
        code = "";
    size_t n = strlen(code);
    char hex[AUDIT_HASH_HEX];
    audit_sha256_hex(code, n, hex);
    json_object_set_new(obj, "code_sha256", json_string(hex));
    json_object_set_new(obj, "code_bytes", json_integer((json_int_t)n));
    size_t keep = n > max ? utf8_cut(code, n, max) : n;
    json_t *text = json_stringn(code, keep);
    if (!text) { /* not UTF-8: the hash still names it */
        json_object_set_new(obj, "code", json_null());
        json_object_set_new(obj, "code_not_utf8", json_true());
        return;
    }
    json_object_set_new(obj, "code", text);
    if (keep < n)
        json_object_set_new(obj, "code_truncated", json_true());
}

int
audit_connection(audit_log_t *log, const char *session, const audit_conn_t *c,
                 err_t *err)
{
    if (!log)
        return 0;
    json_t *f = json_object();
    if (c->verdict)
        json_object_set_new(f, "verdict", json_string(c->verdict));
    if (c->kind)
        json_object_set_new(f, "kind", json_string(c->kind));
    if (c->host)
        json_object_set_new(f, "host", json_string(c->host));
    json_object_set_new(f, "port", json_integer(c->port));
    if (c->addr)
        json_object_set_new(f, "addr", json_string(c->addr));
    if (c->rule)
        json_object_set_new(f, "rule", json_string(c->rule));
    if (c->reason)
        json_object_set_new(f, "reason", json_string(c->reason));
    json_object_set_new(f, "bytes_out", json_integer((json_int_t)c->bytes_out));
    json_object_set_new(f, "bytes_in", json_integer((json_int_t)c->bytes_in));
    json_object_set_new(f, "duration_ms", json_integer(c->duration_ms));
    return audit_append(log, session, "net", f, err);
}
