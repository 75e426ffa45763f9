/*
 * ag_audit: a session's records in the --audit log.
 */
#include "agent/session/ag_audit.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/jget.h"
#include "common/xalloc.h"
#include "packages/pk_key.h"

#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SILENT_TEXT_MAX 512

struct ag_audit {
    audit_log_t *log; /* a reference, or NULL */
    char id[33];
    int64_t started_ms;
    long long executions, errors;
    kb_exec_observer_t obs;
};

/* One execution under way: its start, for the end record. */
typedef struct exec_token {
    long long n;
    int64_t start_ms;
} exec_token_t;

static int
s_sign(void *arg, const void *msg, size_t len, unsigned char sig[64],
       err_t *err)
{
    return pk_seckey_sign(arg, msg, len, sig, err);
}

static void
s_release(void *arg)
{
    pk_seckey_t *k = arg;
    pk_seckey_destroy(&k);
}

audit_log_t *
ag_audit_open(const char *path, const char *key_path, err_t *err)
{
    audit_signer_t signer = {0}, *sp = NULL;
    if (key_path) {
        pk_seckey_t *key = pk_seckey_load(key_path, err);
        if (!key) {
            err_prefix(err, "--audit-key");
            return NULL;
        }
        const pk_pubkey_t *pub = pk_seckey_public(key);
        signer.sign = s_sign;
        signer.release = s_release;
        signer.arg = key;
        memcpy(signer.pub, pub->pk, sizeof signer.pub);
        memcpy(signer.key_id, pub->id, sizeof signer.key_id);
        sp = &signer;
    }
    return audit_log_open(path, "--audit", sp, err);
}

ag_audit_t *
ag_audit_new(audit_log_t *log)
{
    ag_audit_t *a = xcalloc(1, sizeof *a);
    a->log = audit_log_ref(log);
    if (log)
        audit_new_id(a->id);
    a->started_ms = clock_mono_ms();
    return a;
}

void
ag_audit_destroy(ag_audit_t **pa)
{
    if (!pa || !*pa)
        return;
    audit_log_close(&(*pa)->log);
    free(*pa);
    *pa = NULL;
}

const char *
ag_audit_id(const ag_audit_t *a)
{
    return a && a->log ? a->id : NULL;
}

audit_log_t *
ag_audit_log(const ag_audit_t *a)
{
    return a ? a->log : NULL;
}

int
ag_audit_file(ag_audit_t *a, const char *dir, const char *via, const char *name,
              const char *path, uint64_t size, const char *sha256, err_t *err)
{
    if (!a || !a->log)
        return 0;
    json_t *f =
        json_pack("{s:s, s:s, s:s?, s:I, s:s?}", "via", via, "name", name,
                  "path", path, "size", (json_int_t)size, "sha256", sha256);
    return audit_append(
        a->log, a->id, strcmp(dir, "in") == 0 ? "file_in" : "file_out", f, err);
}

/* SHA-256 of fd's content from offset 0 (pread: its offset stays), and
 * its size; -1 when it cannot be read. */
static int
s_hash_fd(int fd, char hex[AUDIT_HASH_HEX], uint64_t *size)
{
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    *size = 0;
    char buf[65536];
    ssize_t n;
    while ((n = pread(fd, buf, sizeof buf, (off_t)*size)) > 0) {
        crypto_hash_sha256_update(&st, (unsigned char *)buf, (size_t)n);
        *size += (uint64_t)n;
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(hex, AUDIT_HASH_HEX, h, sizeof h);
    return n == 0 ? 0 : -1;
}

int
ag_audit_file_fd(ag_audit_t *a, const char *dir, const char *via,
                 const char *name, const char *path, int fd, err_t *err)
{
    if (!a || !a->log)
        return 0;
    char hex[AUDIT_HASH_HEX];
    uint64_t size = 0;
    bool hashed = fd >= 0 && s_hash_fd(fd, hex, &size) == 0;
    return ag_audit_file(a, dir, via, name, path, size, hashed ? hex : NULL,
                         err);
}

void
ag_audit_file_out(void *arg, const char *dir, const char *rel, int dirfd,
                  const char *name)
{
    ag_audit_t *a = arg;
    if (!a || !a->log)
        return;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char *path = xasprintf("%s/%s", dir, rel);
    err_t e = {0};
    if (ag_audit_file_fd(a, "out", "copy-out", rel, path, fd, &e))
        fprintf(stderr, "jupyter-agent: audit: %s\n", e.text);
    if (fd >= 0)
        close(fd);
    free(path);
}

/* A string member of a proxy record, or NULL when absent, of another type
 * or holding a NUL (the proxy's lines are read as hostile). */
static const char *
s_str(const json_t *rec, const char *key)
{
    return jget_strict(rec, key, NULL);
}

static uint64_t
s_count(const json_t *rec, const char *key)
{
    int64_t v = jget_int(rec, key, 0);
    return v > 0 ? (uint64_t)v : 0;
}

void
ag_audit_net(void *arg, const json_t *rec)
{
    ag_audit_t *a = arg;
    if (!a || !a->log || !json_is_object(rec))
        return;
    const char *verdict = s_str(rec, "verdict"), *method = s_str(rec, "method");
    int64_t port = jget_int(rec, "port", 0);
    const char *addr = s_str(rec, "address"), *rule = s_str(rec, "rule");
    bool allowed = verdict && strcmp(verdict, "allowed") == 0;
    audit_conn_t c = {
        .verdict = allowed ? "allowed" : "refused",
        .kind = method && strcmp(method, "CONNECT") == 0 ? "connect" : "http",
        .host = s_str(rec, "host"),
        .port = port > 0 && port < 65536 ? (unsigned)port : 0,
        .addr = addr && *addr ? addr : NULL,
        .rule = rule && *rule ? rule : NULL,
        .reason = s_str(rec, "reason"),
        .bytes_out = s_count(rec, "bytes_up"),
        .bytes_in = s_count(rec, "bytes_down"),
        .duration_ms = (int64_t)s_count(rec, "ms")};
    err_t e = {0};
    if (audit_connection(a->log, a->id, &c, &e))
        fprintf(stderr, "jupyter-agent: audit: %s\n", e.text);
}

int
ag_audit_start(ag_audit_t *a, json_t *start, const json_t *inputs, err_t *err)
{
    if (!a || !a->log) {
        json_decref(start);
        return 0;
    }
    if (audit_append(a->log, a->id, "session_start", start, err))
        return -1;
    size_t i;
    json_t *f;
    json_array_foreach(inputs, i, f)
    {
        if (ag_audit_file(a, "in", "--file", jget_str(f, "name", NULL),
                          jget_str(f, "path", NULL),
                          (uint64_t)jget_int(f, "size", 0),
                          jget_str(f, "sha256", NULL), err))
            return -1;
    }
    return 0;
}

int
ag_audit_packages(ag_audit_t *a, const json_t *report, err_t *err)
{
    if (!a || !a->log)
        return 0;
    return audit_append(a->log, a->id, "packages",
                        json_pack("{s:O}", "report", report), err);
}

/* The bytes of text an output carries: a stream's text, an error's
 * name, value and traceback, the values of a display's data by MIME type
 * (an image's base64 as it came). */
static size_t
s_bytes(const json_t *o)
{
    size_t n = 0, i;
    const char *k;
    json_t *v;
    json_t *text = json_object_get(o, "text");
    if (json_is_string(text))
        n += json_string_length(text);
    json_array_foreach(text, i, v) n += json_string_length(v);
    json_object_foreach((json_t *)json_object_get(o, "data"), k, v)
    {
        if (json_is_string(v))
            n += json_string_length(v);
        else if (json_is_array(v)) {
            json_t *line;
            json_array_foreach(v, i, line) n += json_string_length(line);
        } else
            n += json_dumpb(v, NULL, 0, JSON_COMPACT);
    }
    n += json_string_length(json_object_get(o, "ename")) +
         json_string_length(json_object_get(o, "evalue"));
    json_array_foreach(json_object_get(o, "traceback"), i, v) n +=
        json_string_length(v);
    return n;
}

/* {kind: {"count", "bytes"}} of the outputs: "stdout", "stderr",
 * "display_data", "execute_result", "error", ... */
static json_t *
s_outputs(const kb_output_t *out)
{
    json_t *by = json_object();
    json_t *outs = out ? kb_output_outputs(out) : NULL;
    size_t i;
    json_t *o;
    json_array_foreach(outs, i, o)
    {
        const char *type = jget_str(o, "output_type", NULL);
        const char *kind = type ? type : "unknown";
        if (type && strcmp(type, "stream") == 0 && jget_str(o, "name", NULL))
            kind = jget_str(o, "name", NULL);
        size_t bytes = s_bytes(o);
        json_t *k = json_object_get(by, kind);
        if (!k) {
            k = json_pack("{s:i, s:I}", "count", 0, "bytes", (json_int_t)0);
            json_object_set_new(by, kind, k);
        }
        json_object_set_new(k, "count",
                            json_integer(jget_int(k, "count", 0) + 1));
        json_object_set_new(
            k, "bytes",
            json_integer(jget_int(k, "bytes", 0) + (json_int_t)bytes));
    }
    return by;
}

static void *
s_begin(void *arg, const char *code, const kb_exec_opts_t *opts)
{
    ag_audit_t *a = arg;
    exec_token_t *t = xcalloc(1, sizeof *t);
    t->n = ++a->executions;
    t->start_ms = clock_mono_ms();
    json_t *f = json_pack("{s:I, s:b}", "exec", (json_int_t)t->n, "silent",
                          opts && opts->silent);
    /* A silent execution is the agent's own set-up code (formatters,
     * probes): its hash names it, its first bytes show what it is. */
    audit_code_fields(
        f, code, opts && opts->silent ? SILENT_TEXT_MAX : AUDIT_CODE_TEXT_MAX);
    err_t e = {0};
    if (audit_append(a->log, a->id, "exec", f, &e))
        fprintf(stderr, "jupyter-agent: audit: %s\n", e.text);
    return t;
}

static void
s_end(void *arg, void *token, const kb_output_t *out, int rc, const err_t *err)
{
    ag_audit_t *a = arg;
    exec_token_t *t = token;
    const char *status = rc == 0 ? kb_output_status(out) : NULL;
    if (!status)
        status = rc == 0                        ? "unknown"
                 : err->code == ERR_TIMEOUT     ? "timeout"
                 : err->code == ERR_KERNEL      ? "died"
                 : err->code == ERR_INTERRUPTED ? "interrupted"
                                                : "failed";
    if (strcmp(status, "ok") != 0)
        a->errors++;
    json_t *f = json_pack("{s:I, s:s, s:I, s:o}", "exec", (json_int_t)t->n,
                          "status", status, "duration_ms",
                          (json_int_t)(clock_mono_ms() - t->start_ms),
                          "outputs", s_outputs(out));
    if (out && kb_output_truncated(out))
        json_object_set_new(f, "outputs_truncated", json_true());
    if (rc && err->text[0])
        json_object_set_new(f, "error", json_string(err->text));
    err_t e = {0};
    if (audit_append(a->log, a->id, "exec_end", f, &e))
        fprintf(stderr, "jupyter-agent: audit: %s\n", e.text);
    free(t);
}

static void
s_cmd_start(void *arg, unsigned id, char *const *argv, const char *cwd)
{
    ag_audit_t *a = arg;
    buf_t b;
    buf_init(&b, 0);
    json_t *args = json_array();
    for (char *const *p = argv; p && *p; p++) {
        buf_printf(&b, "%s%s", p == argv ? "" : " ", *p);
        json_array_append_new(args, json_integer((json_int_t)strlen(*p)));
    }
    json_t *f = json_pack("{s:I, s:s, s:o}", "cmd", (json_int_t)id, "cwd",
                          cwd ? cwd : "", "arg_bytes", args);
    audit_code_fields(f, buf_cstr(&b), AUDIT_CODE_TEXT_MAX);
    buf_release(&b);
    err_t e = {0};
    if (audit_append(a->log, a->id, "command", f, &e))
        fprintf(stderr, "jupyter-agent: audit: %s\n", e.text);
}

static void
s_cmd_end(void *arg, unsigned id, const sb_cmd_end_t *end, size_t out_bytes)
{
    ag_audit_t *a = arg;
    json_t *f = end ? json_pack("{s:I, s:i, s:i, s:s, s:I}", "cmd",
                                (json_int_t)id, "exit_code", end->exit_code,
                                "signal", end->signal, "status", end->why,
                                "output_bytes", (json_int_t)out_bytes)
                    : json_pack("{s:I, s:s}", "cmd", (json_int_t)id, "status",
                                "did not start");
    err_t e = {0};
    if (audit_append(a->log, a->id, "command_end", f, &e))
        fprintf(stderr, "jupyter-agent: audit: %s\n", e.text);
}

void
ag_audit_cmds(ag_audit_t *a, sb_cmds_limits_t *lim)
{
    if (!a || !a->log)
        return;
    lim->on_start = s_cmd_start;
    lim->on_end = s_cmd_end;
    lim->observer_arg = a;
}

void
ag_audit_watch(ag_audit_t *a, kb_kernel_t *k)
{
    if (!a || !a->log || !k)
        return;
    a->obs = (kb_exec_observer_t){.begin = s_begin, .end = s_end, .arg = a};
    kb_kernel_observe(k, &a->obs);
}

int
ag_audit_end(ag_audit_t *a, const char *status, err_t *err)
{
    if (!a || !a->log)
        return 0;
    json_t *f =
        json_pack("{s:s, s:I, s:I, s:I}", "status", status, "duration_ms",
                  (json_int_t)(clock_mono_ms() - a->started_ms), "executions",
                  (json_int_t)a->executions, "not_ok", (json_int_t)a->errors);
    if (audit_append(a->log, a->id, "session_end", f, err))
        return -1;
    return audit_log_has_signer(a->log) ? audit_seal(a->log, a->id, err) : 0;
}
