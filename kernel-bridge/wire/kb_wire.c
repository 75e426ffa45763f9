#include "kb_wire.h"

#include "common/jsonlim.h"
#include "common/xalloc.h"

#include <limits.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* HMAC-SHA256 (RFC 2104) on OpenSSL's SHA-256, which uses the CPU's SHA
 * instructions where there are any (4x faster than libsodium's portable
 * code on a 700-byte message here, and every iopub message is hashed).
 * The key's inner and outer states are absorbed once and only read
 * afterwards (a server's threads share its key); each signature copies
 * them into a context of its own. */
struct kb_key {
    bool empty;        /* no signing, no checking */
    EVP_MD_CTX *inner; /* SHA-256 after (key ^ ipad) */
    EVP_MD_CTX *outer; /* SHA-256 after (key ^ opad) */
};

kb_key_t *
kb_key_new(const char *key, size_t len)
{
    if (sodium_init() < 0)
        return NULL;
    kb_key_t *k = xcalloc(1, sizeof *k);
    k->empty = len == 0;
    unsigned char block[64] = {0}, pad[64];
    if (len > sizeof block) /* a long key is hashed first */
        SHA256((const unsigned char *)key, len, block);
    else if (len)
        memcpy(block, key, len);
    k->inner = EVP_MD_CTX_new();
    k->outer = EVP_MD_CTX_new();
    if (!k->inner || !k->outer)
        abort(); /* out of memory, as xalloc */
    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] = block[i] ^ 0x36;
    bool ok = EVP_DigestInit_ex(k->inner, EVP_sha256(), NULL) &&
              EVP_DigestUpdate(k->inner, pad, sizeof pad);
    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] = block[i] ^ 0x5c;
    ok = ok && EVP_DigestInit_ex(k->outer, EVP_sha256(), NULL) &&
         EVP_DigestUpdate(k->outer, pad, sizeof pad);
    sodium_memzero(block, sizeof block);
    sodium_memzero(pad, sizeof pad);
    if (!ok)
        abort(); /* SHA-256 missing from libcrypto: nothing can be signed */
    return k;
}

void
kb_key_destroy(kb_key_t **pkey)
{
    if (!pkey || !*pkey)
        return;
    kb_key_t *k = *pkey;
    EVP_MD_CTX_free(k->inner); /* clears the key's states */
    EVP_MD_CTX_free(k->outer);
    sodium_memzero(k, sizeof *k);
    free(k);
    *pkey = NULL;
}

bool
kb_key_is_empty(const kb_key_t *key)
{
    return key->empty;
}

void
kb_key_sign(const kb_key_t *key, const kb_frame_t parts[4], char out[65])
{
    out[0] = '\0';
    if (key->empty)
        return;
    unsigned char mac[SHA256_DIGEST_LENGTH];
    unsigned int n = 0;
    EVP_MD_CTX *work = EVP_MD_CTX_new();
    bool ok = work && EVP_MD_CTX_copy_ex(work, key->inner);
    for (int i = 0; ok && i < 4; i++)
        ok = EVP_DigestUpdate(work, parts[i].data, parts[i].len);
    ok = ok && EVP_DigestFinal_ex(work, mac, &n) &&
         EVP_MD_CTX_copy_ex(work, key->outer) &&
         EVP_DigestUpdate(work, mac, n) && EVP_DigestFinal_ex(work, mac, &n);
    EVP_MD_CTX_free(work);
    if (!ok) /* no signature: every check against it fails */
        return;
    sodium_bin2hex(out, 65, mac, sizeof mac);
}

static void
s_push(kb_wire_out_t *out, void *data, size_t len)
{
    out->frames = xrealloc(out->frames, (out->n + 1) * sizeof *out->frames);
    out->frames[out->n].data = data;
    out->frames[out->n].len = len;
    out->n++;
}

static void
s_push_copy(kb_wire_out_t *out, const void *data, size_t len)
{
    void *copy = xmalloc(len ? len : 1);
    if (len)
        memcpy(copy, data, len);
    s_push(out, copy, len);
}

int
kb_wire_serialize(const kb_msg_t *msg, const kb_key_t *key, kb_wire_out_t *out,
                  err_t *err)
{
    json_t *parts[4] = {kb_msg_header(msg), kb_msg_parent_header(msg),
                        kb_msg_metadata(msg), kb_msg_content(msg)};
    char *text[4] = {0};
    size_t len[4] = {0};
    int rc = -1;

    out->frames = NULL;
    out->n = 0;
    for (int i = 0; i < 4; i++) {
        text[i] = json_dumps(parts[i], JSON_COMPACT);
        if (!text[i]) {
            err_set(err, ERR_KERNEL, "cannot encode message part %d as JSON",
                    i);
            goto out;
        }
        len[i] = strlen(text[i]);
    }
    for (size_t i = 0; i < kb_msg_identity_count(msg); i++) {
        const kb_blob_t *id = kb_msg_identity(msg, i);
        s_push_copy(out, id->data, id->len);
    }
    s_push_copy(out, KB_WIRE_DELIM, KB_WIRE_DELIM_LEN);
    kb_frame_t views[4];
    for (int i = 0; i < 4; i++)
        views[i] = (kb_frame_t){text[i], len[i]};
    char sig[65];
    kb_key_sign(key, views, sig);
    s_push_copy(out, sig, strlen(sig));
    for (int i = 0; i < 4; i++) {
        s_push(out, text[i], len[i]); /* ownership moves to out */
        text[i] = NULL;
    }
    for (size_t i = 0; i < kb_msg_buffer_count(msg); i++) {
        const kb_blob_t *b = kb_msg_buffer(msg, i);
        s_push_copy(out, b->data, b->len);
    }
    rc = 0;
out:
    for (int i = 0; i < 4; i++)
        free(text[i]);
    if (rc)
        kb_wire_out_release(out);
    return rc;
}

void
kb_wire_out_release(kb_wire_out_t *out)
{
    for (size_t i = 0; i < out->n; i++)
        free(out->frames[i].data);
    free(out->frames);
    out->frames = NULL;
    out->n = 0;
}

int
kb_wire_json_depth(const char *text, size_t len)
{
    return jsonlim_scan(text, len).depth;
}

static int
s_reject(uint64_t *counter, err_t *err, const char *why)
{
    if (counter)
        (*counter)++;
    return err_set(err, ERR_KERNEL, "dropped message: %s", why);
}

/* The size, depth and parse-cost caps of one JSON part: 0, or -1 with err
 * set. */
static int
s_check(const kb_frame_t *f, const kb_wire_limits_t *lim, err_t *err)
{
    if (lim->max_json_bytes && f->len > lim->max_json_bytes)
        return err_set(err, ERR_KERNEL,
                       "dropped message: JSON part of %zu bytes", f->len);
    jsonlim_scan_t scan = jsonlim_scan(f->data, f->len);
    jsonlim_t jl = {lim->max_json_depth ? lim->max_json_depth : INT_MAX,
                    lim->json_allowance};
    char why[160];
    if (!jsonlim_fits(&scan, f->len, &jl, why, sizeof why))
        return err_set(err, ERR_KERNEL, "dropped message: %s", why);
    return 0;
}

static size_t
s_ws(const char *s, size_t n, size_t i)
{
    while (i < n &&
           (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* The end of the JSON string starting at s[i] == '"' (one past its closing
 * quote), or 0 if it does not end; *escaped says whether it has a '\\'. */
static size_t
s_string_end(const char *s, size_t n, size_t i, bool *escaped)
{
    *escaped = false;
    for (i++; i < n; i++) {
        if ((unsigned char)s[i] < 0x20)
            return 0;
        if (s[i] == '\\') {
            *escaped = true;
            i++;
        } else if (s[i] == '"') {
            return i + 1;
        }
    }
    return 0;
}

/* The top level of a JSON object, read without building it (kb_wire.h). */
bool
kb_wire_scan_object(const char *s, size_t n, const char *const *keys,
                    size_t nkeys, const char **vals, size_t *lens)
{
    size_t i = s_ws(s, n, 0), wanted = nkeys;
    bool esc;
    for (size_t k = 0; k < nkeys; k++)
        vals[k] = NULL;
    if (i >= n || s[i] != '{')
        return false;
    i = s_ws(s, n, i + 1);
    if (i < n && s[i] == '}')
        return s_ws(s, n, i + 1) == n;
    for (;;) {
        if (i >= n || s[i] != '"')
            return false;
        size_t kend = s_string_end(s, n, i, &esc);
        if (!kend || esc)
            return false;
        wanted = nkeys; /* nkeys = none of them */
        for (size_t k = 0; k < nkeys; k++)
            if (kend - i - 2 == strlen(keys[k]) &&
                memcmp(s + i + 1, keys[k], kend - i - 2) == 0)
                wanted = k;
        i = s_ws(s, n, kend);
        if (i >= n || s[i] != ':')
            return false;
        i = s_ws(s, n, i + 1);
        if (i >= n)
            return false;
        if (s[i] == '"') {
            size_t end = s_string_end(s, n, i, &esc);
            if (!end || (wanted < nkeys && esc))
                return false;
            if (wanted < nkeys) {
                vals[wanted] = s + i + 1;
                lens[wanted] = end - i - 2;
            }
            i = end;
        } else if (s[i] == '{' || s[i] == '[') {
            int depth = 0;
            do {
                if (s[i] == '"') {
                    size_t end = s_string_end(s, n, i, &esc);
                    if (!end)
                        return false;
                    i = end;
                    continue;
                }
                if (s[i] == '{' || s[i] == '[')
                    depth++;
                else if (s[i] == '}' || s[i] == ']')
                    depth--;
                i++;
            } while (depth > 0 && i < n);
            if (depth)
                return false;
            if (wanted < nkeys)
                vals[wanted] = NULL;
        } else {
            size_t start = i;
            while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ' ' &&
                   s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
                i++;
            if (i == start)
                return false;
            if (wanted < nkeys)
                vals[wanted] = NULL;
        }
        i = s_ws(s, n, i);
        if (i < n && s[i] == ',') {
            i = s_ws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == '}')
            return s_ws(s, n, i + 1) == n;
        return false;
    }
}

static json_t *
s_load(const kb_frame_t *f, const kb_wire_limits_t *lim, err_t *err)
{
    if (s_check(f, lim, err))
        return NULL;
    json_error_t jerr;
    json_t *v = json_loadb(f->data, f->len, 0, &jerr);
    if (!v)
        err_set(err, ERR_KERNEL, "dropped message: invalid JSON: %s",
                jerr.text);
    return v;
}

kb_msg_t *
kb_wire_parse(const kb_frame_t *frames, size_t n, const kb_key_t *key,
              const kb_wire_limits_t *limits, kb_wire_stats_t *stats,
              err_t *err)
{
    static const kb_wire_limits_t defaults = {KB_WIRE_DEFAULT_JSON_BYTES,
                                              KB_WIRE_DEFAULT_JSON_DEPTH, 0};
    const kb_wire_limits_t *lim = limits ? limits : &defaults;
    uint64_t *malformed = stats ? &stats->malformed : NULL;
    uint64_t *bad_sig = stats ? &stats->bad_signature : NULL;

    size_t delim = 0;
    while (delim < n &&
           !(frames[delim].len == KB_WIRE_DELIM_LEN &&
             memcmp(frames[delim].data, KB_WIRE_DELIM, KB_WIRE_DELIM_LEN) == 0))
        delim++;
    if (delim == n) {
        s_reject(malformed, err, "no <IDS|MSG> delimiter");
        return NULL;
    }
    if (n - delim < 6) {
        s_reject(malformed, err, "fewer than 5 frames after delimiter");
        return NULL;
    }
    const kb_frame_t *sig = &frames[delim + 1];
    const kb_frame_t *parts = &frames[delim + 2];

    if (!kb_key_is_empty(key)) {
        char want[65];
        kb_key_sign(key, parts, want);
        if (!want[0] || sig->len != KB_WIRE_SIG_HEX ||
            sodium_memcmp(want, sig->data, KB_WIRE_SIG_HEX) != 0) {
            s_reject(bad_sig, err,
                     sig->len ? "bad signature" : "missing signature");
            return NULL;
        }
    }

    /* All four parts pass the size and depth caps. When the top levels of
     * header, parent_header and metadata are plainly objects, those three
     * stay text until used: receivers mostly need header.msg_type,
     * header.msg_id and parent_header.msg_id, read here off the text
     * (jansson builds ~15 allocations per header). Anything unusual
     * (escapes in those values, a missing msg_type, an odd top level) is
     * parsed at once, as content always is. */
    static const char *const hkeys[2] = {"msg_type", "msg_id"};
    static const char *const pkeys[1] = {"msg_id"};
    const char *hv[2], *pv[1], *unused;
    size_t hl[2] = {0}, pl[1] = {0}, unused_len;
    bool lazy =
        !s_check(&parts[0], lim, err) && !s_check(&parts[1], lim, err) &&
        !s_check(&parts[2], lim, err) &&
        kb_wire_scan_object(parts[0].data, parts[0].len, hkeys, 2, hv, hl) &&
        hv[0] && hl[0] < KB_MSG_WIRE_ID_MAX && hl[1] < KB_MSG_WIRE_ID_MAX &&
        kb_wire_scan_object(parts[1].data, parts[1].len, pkeys, 1, pv, pl) &&
        pl[0] < KB_MSG_WIRE_ID_MAX &&
        kb_wire_scan_object(parts[2].data, parts[2].len, NULL, 0, &unused,
                            &unused_len);
    json_t *json[4] = {0};
    for (int i = 0; i < 4; i++) {
        if (lazy && i < 3)
            continue;
        json[i] = s_load(&parts[i], lim, err);
        if (!json[i]) {
            for (int j = 0; j < i; j++)
                json_decref(json[j]);
            if (malformed)
                (*malformed)++;
            return NULL;
        }
    }
    kb_msg_t *msg;
    if (lazy) {
        kb_msg_wire_t w = {
            .header = {parts[0].data, parts[0].len},
            .parent = {parts[1].data, parts[1].len},
            .metadata = {parts[2].data, parts[2].len},
        };
        memcpy(w.msg_type, hv[0], hl[0]);
        memcpy(w.msg_id, hv[1] ? hv[1] : "", hv[1] ? hl[1] : 0);
        memcpy(w.parent_msg_id, pv[0] ? pv[0] : "", pv[0] ? pl[0] : 0);
        msg = kb_msg_from_wire(&w, json[3]);
    } else {
        msg = kb_msg_from_parts(json[0], json[1], json[2], json[3]);
        if (msg &&
            !json_is_string(json_object_get(kb_msg_header(msg), "msg_type"))) {
            kb_msg_destroy(&msg);
            s_reject(malformed, err, "header has no msg_type");
            return NULL;
        }
    }
    if (!msg) {
        s_reject(malformed, err, "a JSON part is not an object");
        return NULL;
    }
    for (size_t i = 0; i < delim; i++)
        kb_msg_add_identity(msg, frames[i].data, frames[i].len);
    for (size_t i = delim + 6; i < n; i++)
        kb_msg_add_buffer(msg, frames[i].data, frames[i].len);
    if (stats)
        stats->accepted++;
    return msg;
}

void
kb_wire_stats_add(kb_wire_stats_t *dst, const kb_wire_stats_t *src)
{
    dst->accepted += src->accepted;
    dst->bad_signature += src->bad_signature;
    dst->malformed += src->malformed;
    dst->foreign += src->foreign;
    dst->oversized += src->oversized;
    dst->bad_channel += src->bad_channel;
    dst->overflow += src->overflow;
}

uint64_t
kb_wire_stats_refused(const kb_wire_stats_t *before, const kb_wire_stats_t *now,
                      char *out, size_t size)
{
    const struct {
        const char *name;
        uint64_t n;
    } kinds[] = {
        {"oversized", now->oversized - before->oversized},
        {"malformed", now->malformed - before->malformed},
        {"unknown channel", now->bad_channel - before->bad_channel},
        {"bad signature", now->bad_signature - before->bad_signature},
        {"past the queue limit", now->overflow - before->overflow},
    };
    uint64_t total = 0;
    size_t used = 0;
    if (size)
        out[0] = '\0';
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (!kinds[i].n)
            continue;
        total += kinds[i].n;
        if (used < size) {
            int w = snprintf(out + used, size - used, "%s%s: %llu",
                             used ? ", " : "", kinds[i].name,
                             (unsigned long long)kinds[i].n);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return total;
}
