/*
 * kb_files_get: files out of the kernel: listing a directory, reading one
 * file, and copying a tree onto the host through an sb_outdir. Each file
 * is streamed in chunks whose size, offset and SHA-256 are checked one by
 * one and as a whole; the exchange itself is kb_files.c's.
 */
#include "kernel-bridge/kb_files.h"
#include "kernel-bridge/kb_files_impl.h"

#include "common/buf.h"
#include "common/escape.h"
#include "common/xalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The listing of `rel_dir` (ls), checked for shape: the "e" array (a new
 * reference) of at most max+1 entries, each an object with a string "p". */
static json_t *
s_list(struct kb_fx_ctx *c, const char *rel_dir, size_t max, unsigned depth,
       err_t *err)
{
    if (strcmp(rel_dir, ".") != 0 && sb_files_check_relpath(rel_dir, err) < 0)
        return NULL;
    json_t *a = kb_fx_request(c,
                              json_pack("{s:s, s:s, s:I, s:I}", "op", "ls",
                                        "rel", rel_dir, "max", (json_int_t)max,
                                        "depth", (json_int_t)depth),
                              KB_FILES_MAX_LIST_BYTES, err);
    if (!a)
        return NULL;
    json_t *e = json_incref(json_object_get(a, "e"));
    json_decref(a);
    if (!json_is_array(e)) {
        json_decref(e);
        err_set(err, ERR_KERNEL, "the kernel's listing of '%s' is malformed",
                rel_dir);
        return NULL;
    }
    if (json_array_size(e) > max + 1) {
        err_set(err, ERR_KERNEL,
                "the kernel listed %zu entries under '%s', more than the %zu "
                "asked for; a misbehaving kernel: stopped",
                json_array_size(e), rel_dir, max + 1);
        json_decref(e);
        return NULL;
    }
    size_t i;
    json_t *v;
    json_array_foreach(e, i, v)
    {
        if (!json_is_string(json_object_get(v, "p"))) {
            err_set(err, ERR_KERNEL,
                    "the kernel's listing of '%s' is malformed (entry %zu)",
                    rel_dir, i + 1);
            json_decref(e);
            return NULL;
        }
    }
    return e;
}

/* "rel_dir/p", or p for ".": the path in the kernel's directory. */
static char *
s_join(const char *rel_dir, const char *p)
{
    return strcmp(rel_dir, ".") == 0 ? xstrdup(p)
                                     : xasprintf("%s/%s", rel_dir, p);
}

json_t *
kb_files_list(kb_kernel_t *k, const char *rel_dir, size_t max_entries,
              const kb_files_opts_t *o, err_t *err)
{
    struct kb_fx_ctx c;
    if (kb_fx_begin(&c, k, o, err))
        return NULL;
    json_t *e = s_list(&c, rel_dir, max_entries, SB_FILES_OUT_MAX_DEPTH, err);
    if (!e)
        return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(e, i, v)
    {
        const char *p = json_string_value(json_object_get(v, "p"));
        json_t *s = json_object_get(v, "s");
        if (json_array_size(list) >= max_entries)
            break;
        if (!json_is_integer(s) || json_integer_value(s) < 0 ||
            json_object_get(v, "k") || json_is_true(json_object_get(v, "d")) ||
            sb_files_out_refusal(p, false, SB_FILES_OUT_MAX_DEPTH))
            continue;
        char *path = s_join(rel_dir, p);
        json_array_append_new(list,
                              json_pack("{s:s, s:O}", "path", path, "size", s));
        free(path);
    }
    json_decref(e);
    return list;
}

/* What the kernel says an entry is, as one of our own words (its text is
 * never printed as given). */
static const char *
s_kind_word(const char *k)
{
    static const char *const known[] = {"symbolic link", "FIFO",
                                        "socket",        "device",
                                        "special file",  "name not UTF-8"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (k && strcmp(k, known[i]) == 0)
            return known[i];
    return "not a regular file";
}

/* Where a file's checked chunks go: 0, or -1 + err to stop. */
typedef int (*s_sink_fn)(void *arg, const unsigned char *b, size_t n,
                         err_t *err);

/* Fetch file `kpath` (relative to the kernel's directory; `ep` its
 * escaped form for messages) from the kernel into `sink`: the size and
 * SHA-256 the kernel announces (a size over `max_bytes` is refused before
 * any byte comes), then each chunk checked for offset, length, base64 and
 * SHA-256, then the whole file's SHA-256. 0, or -1 + err: the sink may
 * have received checked chunks of a file that did not check out whole. */
static int
s_get(struct kb_fx_ctx *c, const char *kpath, const char *ep,
      uint64_t max_bytes, s_sink_fn sink, void *arg, err_t *err)
{
    char *token = NULL;
    unsigned char *bin = NULL;
    int rc = -1;
    json_t *req = json_pack("{s:s, s:s}", "op", "get_open", "p", kpath);
    if (max_bytes < (uint64_t)INT64_MAX)
        json_object_set_new(req, "max", json_integer((json_int_t)max_bytes));
    json_t *a = kb_fx_request(c, req, KB_FX_SMALL_ANSWER, err);
    if (!a)
        return -1;
    const char *t = kb_fx_token(a);
    json_t *js = json_object_get(a, "s");
    const char *wh = json_string_value(json_object_get(a, "h"));
    char want[65] = "";
    if (t && kb_fx_is_hex64(wh))
        snprintf(want, sizeof want, "%s", wh);
    token = t ? xstrdup(t) : NULL;
    json_int_t total = json_is_integer(js) ? json_integer_value(js) : -1;
    json_decref(a);
    if (!token || !want[0] || total < 0) {
        err_set(err, ERR_KERNEL,
                "the kernel's answer for '%s' lacks a token, size or "
                "SHA-256",
                ep);
        goto out;
    }
    if ((uint64_t)total > max_bytes) {
        err_set(err, ERR_IO,
                "'%s' is %llu bytes, over the limit of %llu bytes; not read",
                ep, (unsigned long long)total, (unsigned long long)max_bytes);
        goto drop;
    }
    crypto_hash_sha256_state whole;
    crypto_hash_sha256_init(&whole);
    bin = xmalloc(c->chunk);
    uint64_t off = 0;
    while (off < (uint64_t)total) {
        size_t n = c->chunk;
        if ((uint64_t)total - off < n)
            n = (size_t)((uint64_t)total - off);
        size_t b64max =
            sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL) - 1;
        a = kb_fx_request(c,
                          json_pack("{s:s, s:s, s:I, s:I}", "op", "get_chunk",
                                    "t", token, "o", (json_int_t)off, "n",
                                    (json_int_t)n),
                          b64max + KB_FX_SMALL_ANSWER, err);
        if (!a)
            goto drop;
        json_t *jo = json_object_get(a, "o");
        const char *b = json_string_value(json_object_get(a, "b"));
        const char *h = json_string_value(json_object_get(a, "h"));
        size_t blen = b ? strlen(b) : 0;
        size_t got = 0;
        const char *why = NULL;
        int code = ERR_KERNEL;
        if (!json_is_integer(jo) || json_integer_value(jo) != (json_int_t)off)
            why = "answers for another offset";
        else if (!b || !kb_fx_is_hex64(h))
            why = "lacks data or a SHA-256";
        else if (blen > b64max)
            why = "holds more bytes than asked for";
        else if (sodium_base642bin(bin, c->chunk, b, blen, NULL, &got, NULL,
                                   sodium_base64_VARIANT_ORIGINAL) != 0)
            why = "is not base64";
        else if (got != n)
            why = "holds fewer bytes than announced";
        unsigned char hb[crypto_hash_sha256_BYTES];
        char hex[65];
        if (!why) {
            crypto_hash_sha256(hb, bin, got);
            kb_fx_hex(hex, hb);
            if (strcmp(hex, h) != 0) {
                why = "does not match its SHA-256";
                code = ERR_VERIFY;
            }
        }
        json_decref(a);
        if (why) {
            err_set(err, code,
                    "the kernel's chunk at offset %llu of '%s' %s; not kept",
                    (unsigned long long)off, ep, why);
            goto drop;
        }
        if (sink(arg, bin, got, err) < 0)
            goto drop;
        crypto_hash_sha256_update(&whole, bin, got);
        off += got;
    }
    unsigned char hb[crypto_hash_sha256_BYTES];
    char hex[65];
    crypto_hash_sha256_final(&whole, hb);
    kb_fx_hex(hex, hb);
    if (strcmp(hex, want) != 0) {
        err_set(err, ERR_VERIFY,
                "'%s': the SHA-256 of the %llu bytes received is not the one "
                "the kernel announced; not kept",
                ep, (unsigned long long)off);
        goto drop;
    }
    kb_fx_drop(c, "get_close", token);
    rc = 0;
    goto out;
drop:
    if (err->code != ERR_TIMEOUT)
        kb_fx_drop(c, "get_close", token);
out:
    free(bin);
    free(token);
    return rc;
}

static int
s_sink_outfile(void *arg, const unsigned char *b, size_t n, err_t *err)
{
    return sb_outfile_write(arg, b, n, err);
}

/* Copy one file the listing announced: 0 copied or skipped, -1 stop. */
static int
s_pull_file(struct kb_fx_ctx *c, sb_outdir_t *d, const char *rel_dir,
            const char *p, uint64_t size, bool exec, err_t *err)
{
    sb_outfile_t *f = NULL;
    char *kpath = s_join(rel_dir, p);
    int r = sb_outdir_create(d, p, kpath, size, exec, &f, err);
    if (r != 0) {
        free(kpath);
        return r < 0 ? -1 : 0;
    }
    char *ep = esc_dup(kpath, ESC_NAME);
    int rc = -1;
    if (s_get(c, kpath, ep, UINT64_MAX, s_sink_outfile, f, err) == 0)
        rc = sb_outfile_commit(&f, err) < 0 ? -1 : 0;
    sb_outfile_abort(&f);
    free(ep);
    free(kpath);
    return rc;
}

int
kb_files_pull(kb_kernel_t *k, const char *rel_dir, sb_outdir_t *d,
              const kb_files_opts_t *o, size_t *n_copied, err_t *err)
{
    err_t local; /* the cleanup looks at the error's code */
    if (!err)
        err = &local;
    if (n_copied)
        *n_copied = 0;
    struct kb_fx_ctx c;
    if (kb_fx_begin(&c, k, o, err))
        return -1;
    const sb_files_out_opts_t *oo = sb_outdir_opts(d);
    size_t before = sb_outdir_entries(d);
    size_t room = oo->max_entries > before ? oo->max_entries - before : 0;
    json_t *e = s_list(&c, rel_dir, room, oo->max_depth, err);
    if (!e)
        return -1;
    int rc = 0;
    size_t i;
    json_t *v;
    json_array_foreach(e, i, v)
    {
        const char *p = json_string_value(json_object_get(v, "p"));
        json_t *s = json_object_get(v, "s");
        char *label = s_join(rel_dir, p);
        if (json_object_get(v, "k")) {
            sb_outdir_refuse(
                d, label,
                s_kind_word(json_string_value(json_object_get(v, "k"))));
            free(label);
            continue;
        }
        if (json_is_true(json_object_get(v, "d"))) {
            int r = sb_outdir_mkdir(d, p, label, err);
            free(label);
            if (r < 0) {
                rc = -1;
                break;
            }
            continue;
        }
        free(label);
        if (!json_is_integer(s) || json_integer_value(s) < 0) {
            char *ep = esc_dup(p, ESC_NAME);
            rc =
                err_set(err, ERR_KERNEL,
                        "the kernel's listing gives '%s' no size; stopped", ep);
            free(ep);
            break;
        }
        if (s_pull_file(&c, d, rel_dir, p, (uint64_t)json_integer_value(s),
                        json_is_true(json_object_get(v, "x")), err) < 0) {
            rc = -1;
            break;
        }
    }
    json_decref(e);
    if (n_copied)
        *n_copied = sb_outdir_entries(d) - before;
    return sb_outdir_report(d, rc, err);
}

static int
s_sink_buf(void *arg, const unsigned char *b, size_t n, err_t *err)
{
    if (buf_append(arg, b, n) < 0)
        return err_set(err, ERR_KERNEL,
                       "the kernel sent more bytes than it announced");
    return 0;
}

int
kb_files_read(kb_kernel_t *k, const char *rel_path, size_t max_bytes,
              char **data, size_t *len, const kb_files_opts_t *o, err_t *err)
{
    err_t local; /* s_get looks at the error's code */
    if (!err)
        err = &local;
    *data = NULL;
    *len = 0;
    if (!rel_path)
        return err_set(err, ERR_USAGE, "no file name was given");
    if (sb_files_check_relpath(rel_path, err) < 0)
        return -1;
    struct kb_fx_ctx c;
    if (kb_fx_begin(&c, k, o, err))
        return -1;
    char *ep = esc_dup(rel_path, ESC_NAME);
    buf_t b;
    buf_init(&b, max_bytes);
    int rc = s_get(&c, rel_path, ep, max_bytes, s_sink_buf, &b, err);
    if (rc == 0)
        *data = buf_detach(&b, len);
    else
        err_prefix(err, "reading '%s' from the kernel", ep);
    buf_release(&b);
    free(ep);
    return rc;
}

int
kb_files_copy_out(kb_kernel_t *k, const char *rel_dir, const char *dest_dir,
                  const sb_files_out_opts_t *out, const kb_files_opts_t *o,
                  size_t *n_copied, err_t *err)
{
    if (n_copied)
        *n_copied = 0;
    sb_outdir_t *d = sb_outdir_open(dest_dir, out, err);
    if (!d)
        return -1;
    int rc = kb_files_pull(k, rel_dir, d, o, n_copied, err);
    sb_outdir_destroy(&d);
    return rc;
}
