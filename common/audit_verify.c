/*
 * audit_verify: checking a hash-chained log line by line (audit.h).
 */
#include "common/audit.h"
#include "common/audit_impl.h"
#include "common/jget.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct line {
    const char *p;
    size_t n;      /* without the newline */
    bool whole;    /* ended by a newline */
    json_t *rec;   /* parsed, or NULL */
    long long seq; /* -1 when it has none */
} line_t;

static long long
s_seq(json_t *rec)
{
    return (long long)jget_int(rec, "seq", -1);
}

/* The ERR_VERIFY of line i (0-based). */
static int s_broken(audit_summary_t *sum, const line_t *ln, size_t i,
                    err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int
s_broken(audit_summary_t *sum, const line_t *ln, size_t i, err_t *err,
         const char *fmt, ...)
{
    sum->bad_line = i + 1;
    sum->bad_seq = ln[i].seq;
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (ln[i].seq >= 0)
        return err_set(err, ERR_VERIFY, "line %zu (seq %lld): %s", i + 1,
                       ln[i].seq, what);
    return err_set(err, ERR_VERIFY, "line %zu: %s", i + 1, what);
}

/* A seal record at line i: its shape, its signature, and with `pub` its
 * key. */
static int
s_check_seal(audit_summary_t *sum, const line_t *ln, size_t i,
             const char *log_id, const char *prev, const unsigned char *pub,
             err_t *err)
{
    json_t *r = ln[i].rec;
    const char *sighex = jget_strict(r, "sig", NULL);
    const char *pubhex = jget_strict(r, "pub", NULL);
    long long covers = (long long)jget_int(r, "covers_seq", -2);
    unsigned char sig[64], rpub[32];
    size_t n = 0;
    if (!sighex || !pubhex || covers == -2 ||
        sodium_hex2bin(sig, sizeof sig, sighex, strlen(sighex), NULL, &n,
                       NULL) ||
        n != sizeof sig ||
        sodium_hex2bin(rpub, sizeof rpub, pubhex, strlen(pubhex), NULL, &n,
                       NULL) ||
        n != sizeof rpub)
        return s_broken(sum, ln, i, err,
                        "bad seal: it lacks its sig, pub or covers_seq "
                        "(edited)");
    if (covers != ln[i].seq - 1)
        return s_broken(sum, ln, i, err,
                        "bad seal: it says it covers seq %lld, not the "
                        "record before it",
                        covers);
    if (pub && memcmp(pub, rpub, sizeof rpub) != 0)
        return s_broken(sum, ln, i, err,
                        "the seal is by another key (key id %s), not the "
                        "one given with --pub",
                        jget_strict(r, "key_id", NULL)
                            ? jget_strict(r, "key_id", NULL)
                            : "?");
    char msg[256];
    size_t mlen = audit_seal_message(msg, sizeof msg, log_id, ln[i].seq, prev);
    if (crypto_sign_verify_detached(sig, (const unsigned char *)msg, mlen,
                                    rpub) != 0)
        return s_broken(sum, ln, i, err,
                        "bad seal: the signature does not verify over the "
                        "chain before it (forged, or the log was edited and "
                        "re-chained)");
    return 0;
}

/* The chain over the lines; 0 or -1 (ERR_VERIFY). */
static int
s_check(audit_summary_t *sum, line_t *ln, size_t nl, const unsigned char *pub,
        err_t *err)
{
    json_t *sessions = json_object();
    char prev[AUDIT_HASH_HEX] = "";
    const char *log_id = NULL;
    int rc = -1;
    for (size_t i = 0; i < nl; i++) {
        line_t *l = &ln[i];
        if (!l->whole) {
            s_broken(sum, ln, i, err,
                     "truncated mid-line: the last record has no newline "
                     "(the log was cut short)");
            goto out;
        }
        if (!json_is_object(l->rec) || l->seq < 0) {
            s_broken(sum, ln, i, err,
                     "not an audit record (no JSON object with a seq): "
                     "edited");
            goto out;
        }
        long long want = i == 0 ? 0 : ln[i - 1].seq + 1;
        if (l->seq > want) {
            /* Two lines swapped show as a jump whose missing seq comes
             * next; anything else is records removed. */
            if (i + 1 < nl && ln[i + 1].seq == want)
                s_broken(sum, ln, i, err,
                         "reordered: seq %lld comes before seq %lld (lines "
                         "%zu and %zu are swapped)",
                         l->seq, want, i + 1, i + 2);
            else
                s_broken(sum, ln, i, err,
                         "removed: %lld record(s) missing before it (seq "
                         "%lld..%lld)%s",
                         l->seq - want, want, l->seq - 1,
                         i == 0 ? ": the log does not start with its 'log' "
                                  "record"
                                : "");
            goto out;
        }
        if (l->seq < want) {
            s_broken(sum, ln, i, err,
                     "reordered: seq %lld comes after seq %lld (a record "
                     "moved or repeated)",
                     l->seq, want - 1);
            goto out;
        }
        const char *rprev = jget_strict(l->rec, "prev", NULL);
        if (i == 0) {
            const char *type = jget_strict(l->rec, "type", NULL);
            log_id = jget_strict(l->rec, "log_id", NULL);
            if (!type || strcmp(type, "log") || !log_id ||
                strlen(log_id) != 32) {
                s_broken(sum, ln, i, err,
                         "edited: the first record is not the log's 'log' "
                         "record with its log_id");
                goto out;
            }
            audit_genesis(log_id, prev);
        }
        if (!rprev || strcmp(rprev, prev) != 0) {
            if (i == 0)
                s_broken(sum, ln, i, err,
                         "edited: its prev is not the genesis hash of its "
                         "log_id");
            else
                s_broken(sum, ln, i - 1, err,
                         "edited: its SHA-256 is not the prev that line %zu "
                         "(seq %lld) records",
                         i + 1, l->seq);
            goto out;
        }
        const char *type = jget_strict(l->rec, "type", NULL);
        if (type && strcmp(type, "seal") == 0) {
            if (s_check_seal(sum, ln, i, log_id, prev, pub, err))
                goto out;
            sum->seals++;
            sum->last_seal_line = i + 1;
        }
        const char *sid = jget_strict(l->rec, "session", NULL);
        if (sid)
            json_object_set_new(sessions, sid, json_true());
        const char *ts = jget_strict(l->rec, "ts", NULL);
        if (ts && i == 0)
            snprintf(sum->first_ts, sizeof sum->first_ts, "%s", ts);
        if (ts)
            snprintf(sum->last_ts, sizeof sum->last_ts, "%s", ts);
        audit_sha256_hex(l->p, l->n, prev);
        sum->records++;
    }
    sum->sessions = json_object_size(sessions);
    sum->unsealed = sum->records - sum->last_seal_line;
    rc = 0;
out:
    sum->sessions = json_object_size(sessions);
    json_decref(sessions);
    return rc;
}

int
audit_verify(const char *path, const unsigned char *pub, audit_summary_t *sum,
             err_t *err)
{
    memset(sum, 0, sizeof *sum);
    sum->bad_seq = -1;
    if (sodium_init() < 0)
        return err_set(err, ERR_IO, "libsodium did not start");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_errno(err, errno == ENOENT ? ERR_USAGE : ERR_IO,
                         "cannot open %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, ERR_USAGE, "%s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return err_set(err, ERR_VERIFY,
                       "%s is empty: not even its 'log' record is there", path);
    }
    size_t size = (size_t)st.st_size;
    const char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return err_errno(err, ERR_IO, "cannot read %s", path);
    size_t cap = 64, nl = 0;
    line_t *ln = malloc(cap * sizeof *ln);
    for (size_t at = 0; ln && at < size;) {
        const char *end = memchr(map + at, '\n', size - at);
        size_t n = end ? (size_t)(end - (map + at)) : size - at;
        if (nl == cap) {
            line_t *more = realloc(ln, (cap *= 2) * sizeof *ln);
            if (!more) {
                free(ln);
                ln = NULL;
                break;
            }
            ln = more;
        }
        line_t *l = &ln[nl++];
        l->p = map + at;
        l->n = n;
        l->whole = end != NULL;
        l->rec = json_loadb(l->p, n, 0, NULL);
        l->seq = s_seq(l->rec);
        at += n + (end ? 1 : 0);
    }
    int rc;
    if (!ln)
        rc = err_set(err, ERR_IO, "out of memory reading %s", path);
    else
        rc = s_check(sum, ln, nl, pub, err);
    for (size_t i = 0; ln && i < nl; i++)
        json_decref(ln[i].rec);
    free(ln);
    munmap((void *)map, size);
    return rc;
}
