/* Unit tests for common/audit (the hash-chained --audit log) and its seal
 * with the archive/manifest keys (agent/session/ag_audit): append, verify,
 * and each kind of tampering named: an edited field, a removed line, two
 * lines swapped, a truncated last line, a forged seal, a re-chained edit,
 * a key mismatch; the refusals of what is not a regular file; one writer
 * for many threads. */
#include "../tap.h"

#include "agent/session/ag_audit.h"
#include "common/audit.h"
#include "packages/pk_key.h"

#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[] = "/tmp/ja-audit-XXXXXX";

static char *
s_path(const char *name)
{
    static char p[8][512];
    static int i;
    char *out = p[i++ % 8];
    snprintf(out, 512, "%s/%s", s_dir, name);
    return out;
}

/* The file's lines (without newlines); *n of them. */
static char **
s_lines(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    char **v = NULL;
    *n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while (f && (got = getline(&line, &cap, f)) > 0) {
        if (line[got - 1] == '\n')
            line[got - 1] = '\0';
        v = realloc(v, (*n + 1) * sizeof *v);
        v[(*n)++] = strdup(line);
    }
    free(line);
    if (f)
        fclose(f);
    return v;
}

static void
s_write(const char *path, char **v, size_t n, bool last_newline)
{
    FILE *f = fopen(path, "w");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s", v[i], i + 1 < n || last_newline ? "\n" : "");
    fclose(f);
}

static void
s_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Verify `path`; the error text in *what (static). */
static int
s_verify(const char *path, const unsigned char *pub, audit_summary_t *sum,
         const char **what)
{
    static err_t err;
    memset(&err, 0, sizeof err);
    int rc = audit_verify(path, pub, sum, &err);
    *what = err.text;
    if (rc)
        diag("verify: %s", err.text);
    return rc ? err.code : 0;
}

/* A copy of `good` with line `i` (0-based) replaced by `text`. */
static void
s_edit_line(const char *good, const char *out, size_t i, const char *from,
            const char *to)
{
    size_t n;
    char **v = s_lines(good, &n);
    char *at = strstr(v[i], from);
    if (at) {
        size_t len = strlen(v[i]) - strlen(from) + strlen(to) + 1;
        char *nl = malloc(len);
        snprintf(nl, len, "%.*s%s%s", (int)(at - v[i]), v[i], to,
                 at + strlen(from));
        free(v[i]);
        v[i] = nl;
    }
    s_write(out, v, n, true);
    s_free(v, n);
}

typedef struct th_arg {
    audit_log_t *log;
    int id;
} th_arg_t;

static void *
s_thread(void *p)
{
    th_arg_t *a = p;
    char sid[16];
    snprintf(sid, sizeof sid, "thread-%d", a->id);
    for (int i = 0; i < 50; i++)
        audit_append(a->log, sid, "exec", json_pack("{s:i}", "i", i), NULL);
    return NULL;
}

int
main(void)
{
    if (!mkdtemp(s_dir) || sodium_init() < 0)
        return 1;
    err_t err = {0};
    pk_pubkey_t pub, other;
    ok(pk_key_generate(s_path("k"), "audit", &pub, &err) == 0 &&
           pk_key_generate(s_path("k2"), NULL, &other, &err) == 0,
       "two archive keys made (%s)", err.text);

    /* A log with two sessions, sealed by the key at the end. */
    const char *log_path = s_path("a.log");
    audit_log_t *log = ag_audit_open(log_path, s_path("k"), &err);
    ok(log != NULL, "an --audit log opens with --audit-key (%s)", err.text);
    struct stat st;
    ok(stat(log_path, &st) == 0 && (st.st_mode & 0777) == 0600,
       "a new log is created mode 0600 (%o)", st.st_mode & 0777);
    audit_log_t *again = ag_audit_open(log_path, NULL, &err);
    ok(again == log, "the same file opened again in one process is the "
                     "same writer");
    audit_log_close(&again);
    ag_audit_t *s1 = ag_audit_new(log), *s2 = ag_audit_new(log);
    ok(ag_audit_id(s1) && ag_audit_id(s2) &&
           strcmp(ag_audit_id(s1), ag_audit_id(s2)) != 0,
       "each session has its own id");
    ag_audit_start(s1, json_pack("{s:s}", "kernel", "python3"), NULL, &err);
    ag_audit_start(s2, json_pack("{s:s}", "kernel", "python3"), NULL, &err);
    ag_audit_file(s1, "in", "--file", "data.csv", "/tmp/data.csv", 3,
                  "427f93cafd9cc19be6eec03e590c9c6cdf9f688a5eaf21fa8d72351e"
                  "2b15fd05",
                  &err);
    audit_connection(ag_audit_log(s2), ag_audit_id(s2),
                     &(audit_conn_t){.verdict = "allowed",
                                     .kind = "connect",
                                     .host = "pypi.example",
                                     .port = 443,
                                     .rule = "*.example",
                                     .bytes_out = 10,
                                     .bytes_in = 20},
                     &err);
    json_t *code = json_object();
    audit_code_fields(code, "print('hello')", AUDIT_CODE_TEXT_MAX);
    audit_append(log, ag_audit_id(s1), "exec", code, &err);
    ok(ag_audit_end(s1, "ok", &err) == 0, "session 1 ends, sealed (%s)",
       err.text);
    ag_audit_end(s2, "ok", &err);
    ag_audit_destroy(&s1);
    ag_audit_destroy(&s2);
    audit_log_close(&log);

    audit_summary_t sum;
    const char *what;
    is_int(s_verify(log_path, pub.pk, &sum, &what), 0,
           "an untouched log verifies with its key");
    is_int(sum.sessions, 2, "two sessions counted");
    ok(sum.seals == 2 && sum.unsealed == 0,
       "sealed at each session's end, nothing after the last seal (%zu "
       "seals, %zu unsealed)",
       sum.seals, sum.unsealed);
    size_t n;
    char **lines = s_lines(log_path, &n);
    is_int(sum.records, n, "every line is a record (%zu)", n);
    ok(n > 0 && strstr(lines[0], "\"type\":\"log\"") &&
           strstr(lines[0], "\"log_id\""),
       "the first record is the log's own, with its log_id");
    ok(strstr(lines[n - 1], "\"type\":\"seal\"") != NULL,
       "the last record is a seal");
    bool code_ok = false, net_ok = false;
    char hello[AUDIT_HASH_HEX];
    audit_sha256_hex("print('hello')", 14, hello);
    for (size_t i = 0; i < n; i++) {
        code_ok |= strstr(lines[i], hello) &&
                   strstr(lines[i], "\"code\":\"print('hello')\"");
        net_ok |= strstr(lines[i], "\"type\":\"net\"") &&
                  strstr(lines[i], "\"host\":\"pypi.example\"") &&
                  strstr(lines[i], "\"rule\":\"*.example\"");
    }
    ok(code_ok, "an execution record holds the code's SHA-256 and text");
    ok(net_ok, "a connection record holds host, port, rule and verdict");

    /* Appending again continues the chain (a second command, same file). */
    log = audit_log_open(log_path, NULL, NULL, &err);
    audit_append(log, "late", "exec", NULL, &err);
    audit_log_close(&log);
    is_int(s_verify(log_path, pub.pk, &sum, &what), 0,
           "a log appended to by a later open still verifies");
    ok(sum.unsealed == 1,
       "... and the record after the last seal is "
       "counted unsealed (%zu)",
       sum.unsealed);
    s_free(lines, n);
    lines = s_lines(log_path, &n);

    /* Tampering, each on a copy. */
    const char *t = s_path("t.log");
    s_edit_line(log_path, t, 2, "python3", "python4");
    is_int(s_verify(t, pub.pk, &sum, &what), ERR_VERIFY,
           "an edited field is caught");
    ok(sum.bad_line == 3 && strstr(what, "line 3 (seq 2)") &&
           strstr(what, "edited"),
       "... naming line 3, seq 2, edited");

    char **v = s_lines(log_path, &n);
    free(v[3]);
    memmove(&v[3], &v[4], (n - 4) * sizeof *v);
    s_write(t, v, n - 1, true);
    is_int(s_verify(t, pub.pk, &sum, &what), ERR_VERIFY,
           "a removed line is caught");
    ok(sum.bad_line == 4 && strstr(what, "removed"),
       "... naming line 4 and 'removed'");
    s_free(v, n - 1);

    v = s_lines(log_path, &n);
    char *tmp = v[3];
    v[3] = v[4];
    v[4] = tmp;
    s_write(t, v, n, true);
    s_free(v, n);
    is_int(s_verify(t, pub.pk, &sum, &what), ERR_VERIFY,
           "two swapped lines are caught");
    ok(sum.bad_line == 4 && strstr(what, "reordered") &&
           strstr(what, "swapped"),
       "... naming line 4 and 'reordered' (swapped)");

    v = s_lines(log_path, &n);
    v[n - 1][strlen(v[n - 1]) / 2] = '\0';
    s_write(t, v, n, false);
    s_free(v, n);
    is_int(s_verify(t, pub.pk, &sum, &what), ERR_VERIFY,
           "a last line cut short is caught");
    ok(sum.bad_line == n && strstr(what, "truncated mid-line"),
       "... naming the last line and 'truncated mid-line'");
    log = audit_log_open(t, NULL, NULL, &err);
    ok(!log && err.code == ERR_VERIFY && strstr(err.text, "middle of a line"),
       "and nothing is appended to a log that ends mid-line (%s)", err.text);
    audit_log_close(&log);

    /* The last seal (line n - 1): a different signature. */
    size_t seal = n - 2;
    ok(strstr(lines[seal], "\"type\":\"seal\"") != NULL, "line %zu is a seal",
       seal + 1);
    char *sig = strstr(lines[seal], "\"sig\":\"") + 7;
    char flipped[2] = {sig[0] == 'a' ? 'b' : 'a', 0};
    char from[3] = {sig[0], sig[1], 0}, to[3] = {flipped[0], sig[1], 0};
    (void)from;
    char *forged = strdup(lines[seal]);
    forged[sig - lines[seal]] = to[0];
    v = s_lines(log_path, &n);
    free(v[seal]);
    v[seal] = forged;
    /* Re-chain the line after it so only the seal is wrong. */
    char h[AUDIT_HASH_HEX];
    audit_sha256_hex(forged, strlen(forged), h);
    char *pv = strstr(v[seal + 1], "\"prev\":\"") + 8;
    memcpy(pv, h, 64);
    s_write(t, v, n, true);
    s_free(v, n);
    is_int(s_verify(t, pub.pk, &sum, &what), ERR_VERIFY,
           "a forged seal is caught");
    ok(sum.bad_line == seal + 1 && strstr(what, "bad seal"),
       "... naming its line and 'bad seal'");

    /* An edit re-chained to the end (every prev recomputed): the chain is
     * whole again, the seal's signature is not. */
    v = s_lines(log_path, &n);
    char *e = strstr(v[2], "python3");
    e[6] = '4';
    for (size_t i = 3; i < n; i++) {
        audit_sha256_hex(v[i - 1], strlen(v[i - 1]), h);
        memcpy(strstr(v[i], "\"prev\":\"") + 8, h, 64);
    }
    s_write(t, v, n, true);
    s_free(v, n);
    is_int(s_verify(t, NULL, &sum, &what), ERR_VERIFY,
           "an edit with the chain recomputed is still caught by the seal "
           "after it");
    ok(strstr(what, "bad seal") != NULL, "... as a bad seal");

    is_int(s_verify(log_path, other.pk, &sum, &what), ERR_VERIFY,
           "a log checked with another key fails");
    ok(strstr(what, "another key") != NULL, "... naming the key mismatch");

    /* Refusals: a symbolic link, a FIFO. */
    ok(symlink(log_path, s_path("link.log")) == 0, "a symbolic link made");
    log = audit_log_open(s_path("link.log"), "--audit", NULL, &err);
    ok(!log && err.code == ERR_USAGE && strstr(err.text, "symbolic link"),
       "a symbolic link is refused (%s)", err.text);
    mkfifo(s_path("fifo.log"), 0600);
    log = audit_log_open(s_path("fifo.log"), "--audit", NULL, &err);
    ok(!log && err.code == ERR_USAGE && strstr(err.text, "FIFO"),
       "a FIFO is refused (%s)", err.text);
    log = audit_log_open("/dev/null", "--audit", NULL, &err);
    ok(!log && err.code == ERR_USAGE, "a device is refused (%s)", err.text);

    /* One writer, four threads. */
    log = audit_log_open(s_path("th.log"), NULL, NULL, &err);
    pthread_t th[4];
    th_arg_t ta[4];
    for (int i = 0; i < 4; i++) {
        ta[i] = (th_arg_t){log, i};
        pthread_create(&th[i], NULL, s_thread, &ta[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    audit_log_close(&log);
    is_int(s_verify(s_path("th.log"), NULL, &sum, &what), 0,
           "four threads writing one log leave a whole chain");
    ok(sum.records == 201 && sum.sessions == 4,
       "... of 200 records and the log's own, 4 sessions (%zu, %zu)",
       sum.records, sum.sessions);

    s_free(lines, n);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system(cmd)) {
    }
    return done_testing();
}
