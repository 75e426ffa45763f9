/*
 * kb_files: files through the kernel (kb_files.py on the kernel's side).
 *
 * Each request is one silent execute_request calling
 * sys.modules['_jupyter_agent_files'].run(JSON); its answer is the one
 * display_data of type KB_FILES_MIME whose "r" is the request's id. What
 * the kernel answers is hostile: every field is checked for type and
 * range before use, every answer's cost is capped by its kb_output (and a
 * kernel that passes the cap is interrupted at once), and file data is
 * checked chunk by chunk and as a whole.
 *
 * This file holds the exchange (requests, installing the helper) and copying
 * in; listing and copying out are kb_files_get.c.
 */
#include "kernel-bridge/kb_files.h"
#include "kernel-bridge/kb_files_impl.h"

#include "common/escape.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern const char kb_files_py[]; /* kb_files.py, built in by tools/embed */

#define HELPER_MODULE "_jupyter_agent_files"

void
kb_files_opts_init(kb_files_opts_t *o)
{
    memset(o, 0, sizeof *o);
}

static void
s_ctx_init(struct kb_fx_ctx *c, kb_kernel_t *k, const kb_files_opts_t *o)
{
    kb_files_opts_t d;
    if (!o) {
        kb_files_opts_init(&d);
        o = &d;
    }
    c->k = k;
    c->dir = o->kernel_dir;
    c->chunk = o->chunk_bytes ? o->chunk_bytes : KB_FILES_CHUNK_DEFAULT;
    if (c->chunk < KB_FILES_CHUNK_MIN)
        c->chunk = KB_FILES_CHUNK_MIN;
    if (c->chunk > KB_FILES_CHUNK_MAX)
        c->chunk = KB_FILES_CHUNK_MAX;
    c->timeout_ms = o->timeout_ms == 0 ? 60000 : o->timeout_ms;
    if (c->timeout_ms < 0)
        c->timeout_ms = 0;
    if (sodium_init() < 0)
        abort();
    unsigned char r[8];
    randombytes_buf(r, sizeof r);
    sodium_bin2hex(c->nonce, sizeof c->nonce, r, sizeof r);
    c->seq = 0;
}

static bool
s_truncated(void *arg)
{
    return kb_output_truncated(arg);
}

/* The kernel's text (an error, a name) made safe for a message. */
static void
s_set_kernel_text(err_t *err, int code, const char *what, const char *text)
{
    char *e = esc_dup(text ? text : "?", ESC_NAME);
    err_set(err, code, "%s: %.600s", what, e);
    free(e);
}

/* Evaluate Python expression `expr` in a silent execution and return the
 * one answer with id `rid` (a new reference), or NULL + err. `op` names
 * the request in messages.
 *
 * The expression travels as the execute_request's user_expressions with
 * empty code: ipykernel hashes every cell's code in pure Python for its
 * debugger (about 0.7 s per MiB) and IPython keeps it in linecache for
 * good, while a user expression is only eval()ed. */
static json_t *
s_exec(struct kb_fx_ctx *c, const char *expr, const char *rid, const char *op,
       size_t cap, err_t *err)
{
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    xo.stop_on_error = false;
    xo.user_expressions = json_pack("{s:s}", "r", expr);
    kb_output_t *out = kb_output_new(NULL, cap);
    kb_exec_hooks_t hooks = {.should_stop = s_truncated, .arg = out};
    json_t *answer = NULL;
    err_t e;
    int rc = kb_kernel_execute(c->k, "", &xo, c->timeout_ms, out, &hooks, &e);
    json_decref(xo.user_expressions);
    if (kb_output_truncated(out)) {
        err_set(err, ERR_KERNEL,
                "the kernel answered a file request (%s) with more than "
                "%zu bytes; stopped it (%s)",
                op, cap, rc < 0 ? e.text : "completed");
        goto out;
    }
    if (rc < 0) {
        err_set(err, e.code == ERR_TIMEOUT ? ERR_TIMEOUT : ERR_KERNEL,
                "file request (%s): %s", op, e.text);
        goto out;
    }
    size_t i, n = 0;
    json_t *o, *error = NULL;
    json_array_foreach(kb_output_outputs(out), i, o)
    {
        const char *type = json_string_value(json_object_get(o, "output_type"));
        if (type && strcmp(type, "error") == 0 && !error)
            error = o;
        json_t *a = json_object_get(json_object_get(o, "data"), KB_FILES_MIME);
        const char *r = json_string_value(json_object_get(a, "r"));
        if (!json_is_object(a) || !r || strcmp(r, rid) != 0)
            continue;
        if (n++ == 0)
            answer = json_incref(a);
    }
    if (n > 1) {
        err_set(err, ERR_KERNEL,
                "the kernel answered a file request (%s) %zu times; a "
                "misbehaving kernel: stopped",
                op, n);
        json_decref(answer);
        answer = NULL;
        goto out;
    }
    if (!answer) {
        json_t *ue = json_object_get(kb_output_user_expressions(out), "r");
        const char *st = json_string_value(json_object_get(ue, "status"));
        if (!error && st && strcmp(st, "error") == 0)
            error = ue;
        if (error) {
            const char *en = json_string_value(json_object_get(error, "ename"));
            const char *ev =
                json_string_value(json_object_get(error, "evalue"));
            char *t = xasprintf("%s: %s", en ? en : "?", ev ? ev : "");
            char what[128];
            snprintf(what, sizeof what,
                     "the kernel's file helper failed (%s); it needs an "
                     "IPython kernel",
                     op);
            s_set_kernel_text(err, ERR_KERNEL, what, t);
            free(t);
        } else
            err_set(err, ERR_KERNEL,
                    "the kernel sent no answer to a file request (%s); it "
                    "needs an IPython kernel (ipykernel)",
                    op);
        goto out;
    }
    const char *kerr = json_string_value(json_object_get(answer, "error"));
    if (json_object_get(answer, "error")) {
        char what[96];
        snprintf(what, sizeof what, "the kernel refused (%s)", op);
        s_set_kernel_text(err, ERR_IO, what, kerr ? kerr : "(no reason)");
        json_decref(answer);
        answer = NULL;
    }
out:
    kb_output_destroy(&out);
    return answer;
}

/* Send request `req` (stolen) and return the answer (new reference).
 * `b64` (base64 text, or NULL) goes as a second argument, a plain Python
 * literal, so the kernel does not scan it again as JSON. */
static json_t *
s_request_data(struct kb_fx_ctx *c, json_t *req, const char *b64, size_t cap,
               err_t *err)
{
    char rid[48];
    snprintf(rid, sizeof rid, "%s-%lu", c->nonce, ++c->seq);
    json_object_set_new(req, "r", json_string(rid));
    if (c->dir)
        json_object_set_new(req, "dir", json_string(c->dir));
    char op[32];
    snprintf(op, sizeof op, "%s",
             json_string_value(json_object_get(req, "op")));
    /* The request as a Python string literal: JSON's string syntax, with
     * non-ASCII kept as UTF-8 (so no \u surrogate pairs, which Python
     * would not join). */
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    json_t *s = json_string(text);
    free(text);
    char *lit = json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(s);
    if (!lit) {
        err_set(err, ERR_USAGE, "file request (%s): not valid UTF-8", op);
        return NULL;
    }
    char *expr = xasprintf(
        "__import__('sys').modules['" HELPER_MODULE "'].run(%s%s%s%s)", lit,
        b64 ? ", '" : "", b64 ? b64 : "", b64 ? "'" : "");
    free(lit);
    json_t *answer = s_exec(c, expr, rid, op, cap, err);
    free(expr);
    return answer;
}

json_t *
kb_fx_request(struct kb_fx_ctx *c, json_t *req, size_t cap, err_t *err)
{
    return s_request_data(c, req, NULL, cap, err);
}

/* The first 16 hex digits of kb_files.py's SHA-256: the helper version. */
static const char *
s_source_id(void)
{
    static char id[17];
    if (!id[0]) {
        unsigned char h[crypto_hash_sha256_BYTES];
        crypto_hash_sha256(h, (const unsigned char *)kb_files_py,
                           strlen(kb_files_py));
        sodium_bin2hex(id, sizeof id, h, 8);
    }
    return id;
}

/* Install the helper: its source executed into a fresh module, as a user
 * expression (so neither the debugger's hash nor linecache sees it). */
static int
s_install(struct kb_fx_ctx *c, err_t *err)
{
    json_t *src = json_string(kb_files_py);
    char *lit = json_dumps(src, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(src);
    char *expr = xasprintf(
        "(lambda m, s: (exec(compile(%s, '<jupyter-agent files>', 'exec'), "
        "m.__dict__), setattr(m, 'SOURCE_ID', '%s'), "
        "s.modules.__setitem__(m.__name__, m)))(__import__('types')."
        "ModuleType('" HELPER_MODULE "'), __import__('sys'))",
        lit, s_source_id());
    free(lit);
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.silent = true;
    xo.store_history = false;
    xo.stop_on_error = false;
    xo.user_expressions = json_pack("{s:s}", "r", expr);
    free(expr);
    kb_output_t *out = kb_output_new(NULL, KB_FX_SMALL_ANSWER);
    kb_exec_hooks_t hooks = {.should_stop = s_truncated, .arg = out};
    err_t e;
    int rc = kb_kernel_execute(c->k, "", &xo, c->timeout_ms, out, &hooks, &e);
    json_decref(xo.user_expressions);
    json_t *ue = json_object_get(kb_output_user_expressions(out), "r");
    const char *st = json_string_value(json_object_get(ue, "status"));
    if (rc < 0)
        err_set(err, e.code == ERR_TIMEOUT ? ERR_TIMEOUT : ERR_KERNEL,
                "installing the file helper in the kernel: %s", e.text);
    else if (!st || strcmp(st, "ok") != 0) {
        const char *en = json_string_value(json_object_get(ue, "ename"));
        const char *ev = json_string_value(json_object_get(ue, "evalue"));
        char *t = xasprintf("%s: %s", en ? en : "no result",
                            ev ? ev : "(an IPython kernel is needed)");
        s_set_kernel_text(err, ERR_KERNEL,
                          "installing the file helper in the kernel", t);
        free(t);
        rc = -1;
    }
    kb_output_destroy(&out);
    return rc;
}

/* "hello": the kernel directory as the kernel reports it (a new string),
 * installing the helper first unless this very version answers. */
static char *
s_hello(struct kb_fx_ctx *c, err_t *err)
{
    json_t *a = kb_fx_request(c, json_pack("{s:s}", "op", "hello"),
                              KB_FX_SMALL_ANSWER, NULL);
    const char *id = json_string_value(json_object_get(a, "id"));
    if (!id || strcmp(id, s_source_id()) != 0) {
        json_decref(a);
        if (s_install(c, err) < 0)
            return NULL;
        a = kb_fx_request(c, json_pack("{s:s}", "op", "hello"),
                          KB_FX_SMALL_ANSWER, err);
        if (!a)
            return NULL;
    }
    const char *dir = json_string_value(json_object_get(a, "dir"));
    char *r = dir ? xstrdup(dir) : NULL;
    json_decref(a);
    if (!r)
        err_set(err, ERR_KERNEL,
                "the kernel's file helper did not name its directory");
    return r;
}

char *
kb_files_kernel_dir(kb_kernel_t *k, const kb_files_opts_t *o, err_t *err)
{
    struct kb_fx_ctx c;
    s_ctx_init(&c, k, o);
    return s_hello(&c, err);
}

/* s_ctx_init + hello, for the calls that need the helper installed but
 * not the directory's name: 0, or -1 + err. */
int
kb_fx_begin(struct kb_fx_ctx *c, kb_kernel_t *k, const kb_files_opts_t *o,
            err_t *err)
{
    s_ctx_init(c, k, o);
    char *dir = s_hello(c, err);
    if (!dir)
        return -1;
    free(dir);
    return 0;
}

/* A token the kernel chose: up to 32 hex digits (it goes back into a
 * request, so nothing else is accepted). */
const char *
kb_fx_token(json_t *answer)
{
    const char *t = json_string_value(json_object_get(answer, "t"));
    if (!t || !*t || strlen(t) > 32 ||
        strspn(t, "0123456789abcdef") != strlen(t))
        return NULL;
    return t;
}

bool
kb_fx_is_hex64(const char *h)
{
    return h && strlen(h) == 64 && strspn(h, "0123456789abcdef") == 64;
}

void
kb_fx_hex(char out[65], const unsigned char h[crypto_hash_sha256_BYTES])
{
    sodium_bin2hex(out, 65, h, crypto_hash_sha256_BYTES);
}

/* Read up to `want` bytes (short only at end of file). */
static ssize_t
s_read_full(int fd, unsigned char *b, size_t want)
{
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, b + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static char *
s_b64(const unsigned char *b, size_t n)
{
    size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *s = xmalloc(len);
    sodium_bin2base64(s, len, b, n, sodium_base64_VARIANT_ORIGINAL);
    return s;
}

/* Best effort: tell the kernel to drop transfer `t` (op put_abort or
 * get_close); errors ignored (the kernel may be gone). */
void
kb_fx_drop(struct kb_fx_ctx *c, const char *op, const char *t)
{
    if (!kb_kernel_alive(c->k))
        return;
    json_t *a = kb_fx_request(c, json_pack("{s:s, s:s}", "op", op, "t", t),
                              KB_FX_SMALL_ANSWER, NULL);
    json_decref(a);
}

int
kb_files_push(kb_kernel_t *k, const char *host_path, const char *name,
              uint64_t max_bytes, const kb_files_opts_t *o, err_t *err)
{
    if (sb_files_check_name(name, err) < 0)
        return -1;
    struct stat st;
    int fd = sb_files_open_input(host_path, max_bytes, &st, err);
    if (fd < 0)
        return -1;
    int rc = kb_files_push_fd(k, fd, host_path, name, o, err);
    close(fd);
    return rc;
}

int
kb_files_push_fd(kb_kernel_t *k, int fd, const char *host_path,
                 const char *name, const kb_files_opts_t *o, err_t *err)
{
    err_t local; /* the cleanup looks at the error's code */
    if (!err)
        err = &local;
    if (sb_files_check_name(name, err) < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return err_set(err, ERR_USAGE, "'%s' is not a regular file", host_path);
    struct kb_fx_ctx c;
    s_ctx_init(&c, k, o);
    int rc = -1;
    char *dir = NULL, *token = NULL;
    unsigned char *chunk = NULL;
    if (!(dir = s_hello(&c, err)))
        goto out;
    json_t *a =
        kb_fx_request(&c,
                      json_pack("{s:s, s:s, s:I}", "op", "put_begin", "name",
                                name, "size", (json_int_t)st.st_size),
                      KB_FX_SMALL_ANSWER, err);
    if (!a)
        goto out;
    const char *t = kb_fx_token(a);
    token = t ? xstrdup(t) : NULL;
    json_decref(a);
    if (!token) {
        err_set(err, ERR_KERNEL, "the kernel's file helper sent no token");
        goto out;
    }
    crypto_hash_sha256_state whole;
    crypto_hash_sha256_init(&whole);
    chunk = xmalloc(c.chunk);
    uint64_t off = 0;
    for (;;) {
        ssize_t n = s_read_full(fd, chunk, c.chunk);
        if (n < 0) {
            err_errno(err, ERR_IO, "reading '%s'", host_path);
            goto abort;
        }
        if (n == 0)
            break;
        if (off + (uint64_t)n > (uint64_t)st.st_size) {
            err_set(err, ERR_IO,
                    "'%s' grew while it was being copied; try again",
                    host_path);
            goto abort;
        }
        unsigned char h[crypto_hash_sha256_BYTES];
        char hex[65];
        crypto_hash_sha256(h, chunk, (unsigned long long)n);
        crypto_hash_sha256_update(&whole, chunk, (unsigned long long)n);
        kb_fx_hex(hex, h);
        char *b64 = s_b64(chunk, (size_t)n);
        a = s_request_data(&c,
                           json_pack("{s:s, s:s, s:I, s:s}", "op", "put_chunk",
                                     "t", token, "o", (json_int_t)off, "h",
                                     hex),
                           b64, KB_FX_SMALL_ANSWER, err);
        free(b64);
        if (!a)
            goto abort;
        json_t *got = json_object_get(a, "n");
        bool good = json_is_integer(got) &&
                    json_integer_value(got) == (json_int_t)(off + (size_t)n);
        json_decref(a);
        if (!good) {
            err_set(err, ERR_KERNEL,
                    "the kernel did not confirm the chunk at offset %llu of "
                    "'%s'",
                    (unsigned long long)off, host_path);
            goto abort;
        }
        off += (uint64_t)n;
    }
    if (off != (uint64_t)st.st_size) {
        err_set(err, ERR_IO, "'%s' shrank while it was being copied; try again",
                host_path);
        goto abort;
    }
    unsigned char h[crypto_hash_sha256_BYTES];
    char hex[65];
    crypto_hash_sha256_final(&whole, h);
    kb_fx_hex(hex, h);
    a = kb_fx_request(&c,
                      json_pack("{s:s, s:s, s:I, s:s}", "op", "put_end", "t",
                                token, "size", (json_int_t)off, "h", hex),
                      KB_FX_SMALL_ANSWER, err);
    if (!a)
        goto out; /* the helper dropped its temporary file */
    const char *kh = json_string_value(json_object_get(a, "h"));
    json_t *ks = json_object_get(a, "size");
    bool good = kh && strcmp(kh, hex) == 0 && json_is_integer(ks) &&
                json_integer_value(ks) == (json_int_t)off;
    json_decref(a);
    if (!good) {
        err_set(err, ERR_VERIFY,
                "the kernel reports a different size or SHA-256 for '%s' "
                "than was sent",
                name);
        goto out;
    }
    rc = 0;
    goto out;
abort:
    if (err->code != ERR_TIMEOUT)
        kb_fx_drop(&c, "put_abort", token);
out:
    if (rc < 0)
        err_prefix(err, "copying '%s' into the kernel", host_path);
    free(chunk);
    free(token);
    free(dir);
    return rc;
}
